#!/usr/bin/env python3
"""`bitnet serve` driven by the official `openai` Python package (PyPI) as a real client:
models, completions and chat completions, with and without streaming. Exit code 77 (reported
as skipped by ctest) when the package is not installed: `pip install openai`, or point
BITNET_OPENAI_PYTHON at an interpreter that has it.

  openai_client_test.py BITNET_CLI MODEL
"""
import sys

from serve_util import running_server


def main():
    try:
        import openai  # noqa: F401
    except ImportError:
        print("SKIPPED: the openai package is not installed (pip install openai)")
        return 77
    from openai import OpenAI

    cli, model = sys.argv[1], sys.argv[2]
    with running_server(cli, model, "-t", "1", "-c", "1024", "--api-key", "test-key") as (base, _):
        client = OpenAI(base_url=base + "/v1", api_key="test-key")
        models = client.models.list()
        assert models.data and models.data[0].id, models

        c = client.completions.create(model=models.data[0].id, prompt="Once upon a time", max_tokens=16, temperature=0)
        text = c.choices[0].text
        assert text and c.usage.completion_tokens == 16, c
        streamed = "".join(ch.choices[0].text for ch in client.completions.create(
            model=models.data[0].id, prompt="Once upon a time", max_tokens=16, temperature=0, stream=True)
            if ch.choices)
        assert streamed == text, (streamed, text)

        messages = [{"role": "user", "content": "Tell me a story."}]
        chat = client.chat.completions.create(model=models.data[0].id, messages=messages, max_tokens=16, temperature=0)
        reply = chat.choices[0].message.content
        assert reply and chat.choices[0].message.role == "assistant", chat
        parts = [ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
            model=models.data[0].id, messages=messages, max_tokens=16, temperature=0, stream=True) if ch.choices]
        assert "".join(parts) == reply, (parts, reply)

        try:
            client.completions.create(model=models.data[0].id, prompt="x", max_tokens=16, top_p=5)
            raise AssertionError("top_p=5 was accepted")
        except openai.BadRequestError as e:
            assert e.status_code == 400
        bad = OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0)
        try:
            bad.models.list()
            raise AssertionError("a wrong key was accepted")
        except openai.AuthenticationError:
            pass
        print("openai client: completions, chat, streaming, errors OK")
        return 0


if __name__ == "__main__":
    sys.exit(main())
