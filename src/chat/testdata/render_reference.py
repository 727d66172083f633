#!/usr/bin/python3
"""Renders chat templates with Jinja2 as Hugging Face's apply_chat_template does, for
chat_template_test.cpp to compare with bitnet's renderer byte for byte.

  render_reference.py CASES.json OUT.json

CASES.json: [{"template": str, "messages": [...], "add_generation_prompt": bool,
              "bos_token": str, "eos_token": str, "tools": optional list}]
OUT.json:   [{"ok": true, "text": str} | {"ok": false, "error": str}] in the same order.

The environment is transformers' (chat_template_utils._compile_jinja_template): an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, loop controls and the
{% generation %} tag, tojson as
json.dumps(ensure_ascii=False) without sorting, and raise_exception; render() gets messages,
tools and documents (None unless given), add_generation_prompt and the special tokens.
Needs Debian's python3-jinja2 (run with /usr/bin/python3).
"""
import json
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Generation(Extension):
    """transformers' AssistantTracker without the tracking: {% generation %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    out = []
    for case in cases:
        try:
            text = env.from_string(case["template"]).render(
                messages=case["messages"],
                tools=case.get("tools"),
                documents=None,
                add_generation_prompt=case["add_generation_prompt"],
                bos_token=case["bos_token"],
                eos_token=case["eos_token"],
            )
            out.append({"ok": True, "text": text})
        except Exception as e:  # noqa: BLE001 - any failure is an expected error to compare
            out.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
