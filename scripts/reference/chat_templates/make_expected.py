#!/usr/bin/env python3
"""Writes tests/fixtures/chat_templates/expected.json: every template of the corpus
(tests/fixtures/chat_templates/*.jinja) rendered with every message set
(tests/fixtures/chat_templates/messages/*.json) by Python's jinja2, configured exactly as
transformers' apply_chat_template configures it (an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension and the {% generation %} block, tojson as
json.dumps(ensure_ascii=False, ...), the globals raise_exception and strftime_now). The C++ engine
(src/jinja/) must render every case byte-identically: tests/jinja/test_jinja_corpus.cpp.

Run it after changing a template or a message set, from the repository root:

    python3 scripts/reference/chat_templates/make_expected.py

It needs Debian's python3-jinja2 (3.1) and nothing else; CI never runs it (the output is
committed). strftime_now is fixed to 2025-03-14 09:26:53 so the outputs are deterministic; the C++
test fixes the same date.

A message set is {"messages": [...], "tools": [...] (optional), "kwargs": {...} (optional),
"add_generation_prompt": bool}. The render context is the one transformers builds:
messages, tools (None when absent), documents (None), add_generation_prompt, bos_token "<bos>",
eos_token "<eos>", then the kwargs. A case that raises records the error instead of an output:
{"raised": message} for raise_exception, {"error": "TypeName: message"} for anything else.
"""
import datetime
import json
import pathlib

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "fixtures" / "chat_templates"
FIXED_NOW = datetime.datetime(2025, 3, 14, 9, 26, 53)


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} block; outside assistant-mask tracking it renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_assistant", []), [], [], body).set_lineno(lineno)

    def _render_assistant(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def context_of(case):
    ctx = {
        "messages": case["messages"],
        "tools": case.get("tools"),
        "documents": None,
        "add_generation_prompt": case.get("add_generation_prompt", True),
        "bos_token": "<bos>",
        "eos_token": "<eos>",
    }
    ctx.update(case.get("kwargs", {}))
    return ctx


def main():
    env = make_env()
    cases = {p.stem: json.loads(p.read_text(encoding="utf-8"))
             for p in sorted((CORPUS / "messages").glob("*.json"))}
    expected = {}
    for tpath in sorted(CORPUS.glob("*.jinja")):
        template = env.from_string(tpath.read_text(encoding="utf-8"))
        results = {}
        for name, case in cases.items():
            try:
                results[name] = {"output": template.render(**context_of(case))}
            except jinja2.exceptions.TemplateError as e:
                if type(e) is jinja2.exceptions.TemplateError:  # raise_exception
                    results[name] = {"raised": e.message}
                else:
                    results[name] = {"error": f"{type(e).__name__}: {e}"}
            except Exception as e:  # noqa: BLE001 - the engine must fail too, with any TemplateError
                results[name] = {"error": f"{type(e).__name__}: {e}"}
        expected[tpath.name] = results
    out = CORPUS / "expected.json"
    out.write_text(json.dumps(expected, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                   encoding="utf-8")
    n = sum(len(r) for r in expected.values())
    print(f"{out.relative_to(ROOT)}: {len(expected)} templates x {len(cases)} message sets = {n} cases")


if __name__ == "__main__":
    main()
