// The chat page served at "/": plain HTML and JavaScript, no build step, no external files.
// It streams /v1/chat/completions (server-sent events), keeps the conversation, and shows the
// decode speed of each reply. `/?prompt=TEXT` sends TEXT on load; `&max_tokens=N` bounds the
// replies; `&sync=1` sends it without streaming, before the page finishes loading (the
// headless browser test: the DOM it dumps then holds the reply).
#include "server/web_ui.h"

namespace bitnet::server {

std::string_view web_ui_html() {
  return R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bitnet</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; background: #f6f6f4; color: #1d1d1b; }
  header { padding: 10px 16px; background: #1d1d1b; color: #f6f6f4; display: flex; gap: 12px; align-items: baseline; }
  header h1 { font-size: 17px; margin: 0; }
  header span { opacity: .7; font-size: 13px; }
  #log { max-width: 860px; margin: 0 auto; padding: 16px; }
  .msg { margin: 10px 0; padding: 10px 12px; border-radius: 8px; white-space: pre-wrap; }
  .user { background: #dfe7f1; }
  .assistant { background: #fff; border: 1px solid #ddd; }
  .stats { font-size: 12px; opacity: .65; margin-top: 6px; }
  form { max-width: 860px; margin: 0 auto; padding: 0 16px 16px; display: flex; gap: 8px; }
  textarea { flex: 1; font: inherit; padding: 8px; min-height: 44px; }
  button { font: inherit; padding: 0 16px; }
  .error { color: #a11; }
</style>
</head>
<body>
<header><h1>bitnet</h1><span id="model"></span></header>
<div id="log"></div>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter for a new line)"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="reset" type="button">Reset</button>
</form>
<script>
const log = document.getElementById('log');
const input = document.getElementById('input');
const messages = [];
let busy = false;
const maxTokens = parseInt(new URLSearchParams(location.search).get('max_tokens') || '0', 10);
// With `bitnet serve --api-key`, the page asks for the key once and keeps it in this browser.
function headers() {
  const h = {'Content-Type': 'application/json'};
  const key = localStorage.getItem('bitnet-api-key');
  if (key) h['Authorization'] = 'Bearer ' + key;
  return h;
}

fetch('/v1/models', {headers: headers()}).then(r => r.json()).then(j => {
  document.getElementById('model').textContent = j.data && j.data[0] ? j.data[0].id : '';
}).catch(() => {});

function add(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  div.textContent = text;
  log.appendChild(div);
  window.scrollTo(0, document.body.scrollHeight);
  return div;
}

async function send(text) {
  if (busy || !text.trim()) return;
  busy = true;
  messages.push({role: 'user', content: text});
  add('user', text);
  const out = add('assistant', '');
  out.id = 'reply-' + messages.length;
  const body = document.createElement('span');
  body.className = 'reply';
  out.appendChild(body);
  let reply = '', tokens = 0, first = 0;
  const t0 = performance.now();
  try {
    const request = () => fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(),
      body: JSON.stringify(Object.assign({messages, stream: true, stream_options: {include_usage: true}},
                                         maxTokens ? {max_tokens: maxTokens} : {}))});
    let res = await request();
    if (res.status === 401) {
      const key = window.prompt('API key');
      if (key) localStorage.setItem('bitnet-api-key', key);
      res = await request();
    }
    if (!res.ok) throw new Error((await res.json()).error.message);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += decoder.decode(value, {stream: true});
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
        const chunk = JSON.parse(event.slice(6));
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) tokens = chunk.usage.completion_tokens;
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && delta.content) {
          if (!first) first = performance.now();
          reply += delta.content;
          body.textContent = reply;
        }
      }
    }
    messages.push({role: 'assistant', content: reply});
    const secs = (performance.now() - (first || t0)) / 1000;
    const stats = document.createElement('div');
    stats.className = 'stats';
    stats.textContent = tokens + ' tokens, ' + (secs > 0 ? (tokens / secs).toFixed(1) : '-') + ' tokens/s';
    out.appendChild(stats);
  } catch (e) {
    messages.pop();
    out.classList.add('error');
    body.textContent = 'error: ' + e.message;
  }
  busy = false;
}

document.getElementById('form').addEventListener('submit', e => {
  e.preventDefault();
  const text = input.value;
  input.value = '';
  send(text);
});
input.addEventListener('keydown', e => {
  if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); document.getElementById('send').click(); }
});
document.getElementById('reset').addEventListener('click', () => { messages.length = 0; log.textContent = ''; });
// One request without streaming, synchronous, so the page's load waits for the reply: what a
// headless browser needs to see it in one go (`/?prompt=TEXT&sync=1`).
function send_sync(text) {
  messages.push({role: 'user', content: text});
  add('user', text);
  const out = add('assistant', '');
  const body = document.createElement('span');
  body.className = 'reply';
  out.appendChild(body);
  const xhr = new XMLHttpRequest();
  xhr.open('POST', '/v1/chat/completions', false);
  for (const [k, v] of Object.entries(headers())) xhr.setRequestHeader(k, v);
  xhr.send(JSON.stringify(Object.assign({messages}, maxTokens ? {max_tokens: maxTokens} : {})));
  const j = JSON.parse(xhr.responseText);
  if (xhr.status !== 200) {
    out.classList.add('error');
    body.textContent = 'error: ' + j.error.message;
    return;
  }
  body.textContent = j.choices[0].message.content;
  messages.push({role: 'assistant', content: body.textContent});
  const stats = document.createElement('div');
  stats.className = 'stats';
  stats.textContent = j.usage.completion_tokens + ' tokens, ' + j.timings.predicted_per_second.toFixed(1) + ' tokens/s';
  out.appendChild(stats);
}

const params = new URLSearchParams(location.search);
const preset = params.get('prompt');
if (preset && params.get('sync')) send_sync(preset);
else if (preset) send(preset);
</script>
</body>
</html>
)HTML";
}

}  // namespace bitnet::server
