"""Syntax errors in words, for the person who typed the pipeline: what the parser accepts at the
point it stopped (asked of Lark's interactive parser, not LALR's merged lookahead), the grammar's
unnamed literals spelled as written, and the commonest slip, a line without its `;`, found by
parsing again with one inserted."""

from __future__ import annotations

import re

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import opcodes
from .errors import PipelineError, expected_words


def explain(text: str, err: UnexpectedInput, parser: Lark) -> PipelineError:
    """The PipelineError for a parse of `text` that `parser` stopped with `err`."""
    return (_refused_opcode(text, err, parser) or _missing_semicolon(text, err, parser)
            or _syntax_error(text, err, parser))


def _refused_opcode(text: str, err: UnexpectedInput, parser: Lark) -> PipelineError | None:
    """An instruction the engine refuses (a tensor copy, `bar.sync`) may stop the parse in its
    operands (`[tmap, {x, y}]`): then why it is refused is the error, not what the parser
    expected there."""
    pos = getattr(err, "pos_in_stream", None)
    if pos is None and isinstance(err, UnexpectedToken):
        pos = err.token.start_pos
    if pos is None:
        return None
    at = max(text.rfind(c, 0, pos) for c in ";{}") + 1
    while at < pos:
        if text[at].isspace():
            at += 1
        elif text.startswith("//", at):
            at = text.find("\n", at) % (len(text) + 1)
        elif text.startswith("/*", at):
            at = text.find("*/", at) + 2 if "*/" in text[at:] else len(text)
        else:
            break
    match = re.compile(parser.get_terminal("OPCODE").pattern.to_regexp()).match(text, at)
    if match is None or match.end() > pos:
        return None
    line = text.count("\n", 0, at) + 1
    try:
        opcodes.parse(match.group(), line, at - text.rfind("\n", 0, at))
    except PipelineError as refused:
        return refused
    return None


def _missing_semicolon(text: str, err: UnexpectedInput, parser: Lark) -> PipelineError | None:
    """The commonest slip: a line without its `;`, which the parser only notices on a later
    line. If a `;` at the end of the code line before the error lets the parse go further, that
    is the error to report."""
    pos = getattr(err, "pos_in_stream", None)
    if pos is None and isinstance(err, UnexpectedToken):
        pos = err.token.start_pos
    if pos is None:
        return None
    before = _end_of_previous(text, text.rfind("\n", 0, pos) + 1)
    if before is None:
        return None
    line, column = before
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    at = starts[line - 1] + column - 1
    if text[at - 1:at] in (";", "{", "}", ",", "(", "["):
        return None
    try:
        parser.parse(text[:at] + ";" + text[at:])
    except UnexpectedInput as again:
        later = getattr(again, "pos_in_stream", None)
        if later is None and isinstance(again, UnexpectedToken):
            later = again.token.start_pos
        if later is None or later <= pos + 1:
            return None
    return PipelineError("a `;` is missing at the end of this line", line, column,
                         hint="every declaration and instruction ends with `;`")


def _named(expected, parser: Lark) -> set[str]:
    """Lark's names for the grammar's literals (`__ANON_2`, `PIPELINESTATE`) as the literal
    itself, spelled as the grammar spells it (`PipelineState`, not `pipelinestate`)."""
    literals = {t.name: f"`{t.pattern.value}`" for t in parser.terminals
                if t.pattern.type == "str" and t.pattern.value.isidentifier()}
    literals.update({t.name: f"`{t.pattern.value}`" for t in parser.terminals
                     if t.name.startswith("__ANON") and t.pattern.type == "str"})
    return {literals.get(name, name) for name in expected}


TOP_LEVEL = {"param", "tensor", "smem", "barrier", "tmem", "agent", "helper", "bug", "cluster"}


def _unclosed_brace(text: str, pos: int) -> int | None:
    """The line of the innermost `{` still open at `pos` (comments and strings skipped)."""
    opened, i = [], 0
    while i < pos:
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = pos if i == -1 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i)
            i = pos if i == -1 else i + 2
        elif text[i] == '"':
            i = text.find('"', i + 1)
            i = pos if i == -1 else i + 1
        else:
            if text[i] == "{":
                opened.append(i)
            elif text[i] == "}" and opened:
                opened.pop()
            i += 1
    return text.count("\n", 0, opened[-1]) + 1 if opened else None


def _syntax_error(text: str, err: UnexpectedInput, parser: Lark) -> PipelineError:
    line, column = getattr(err, "line", 1), getattr(err, "column", 1)
    if isinstance(err, UnexpectedToken) and err.interactive_parser is not None:
        # LALR merges lookaheads; asking the parser which tokens it accepts here is exact
        try:
            err.expected = err.interactive_parser.accepts() or err.expected
        except Exception:  # noqa: BLE001 - keep Lark's own set if the probe fails
            pass
    if getattr(err, "expected", None) is not None:
        err.expected = _named(err.expected, parser)
    if isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken)
                                          and err.token.type == "$END"):
        lines = text.rstrip().splitlines() or [""]
        expected = expected_words(err.expected)
        open_at = _unclosed_brace(text, len(text))
        return PipelineError(f"the text ends here, but {expected} was expected",
                             len(lines), len(lines[-1]) + 1,
                             hint=f"the `{{` on line {open_at} is never closed: is a `}}` missing?"
                             if open_at else "is a `}` or a `;` missing?")
    if isinstance(err, UnexpectedToken):
        got = str(err.token)
        expected = err.expected
        if got == ".":
            return PipelineError("unexpected `.`", line, column,
                                 hint="is the instruction misspelled? PTX instructions here "
                                      "start with mbarrier., cp., fence., tcgen05., ld. or st.")
        if "SEMICOLON" in expected:
            before = _end_of_previous(text, err.token.start_pos)
            if before is not None and before[0] < line:
                return PipelineError("a `;` is missing at the end of this line", *before,
                                     hint="every declaration and instruction ends with `;`")
            want = "`,` or `;`" if "COMMA" in expected else "`;`"
            if set(expected) - {"SEMICOLON", "COMMA"}:  # LALR's lookahead: say all of it
                want = expected_words(expected)
            return PipelineError(f"unexpected `{got[:40]}`: expected {want}", line, column,
                                 hint=_hint(got, expected))
        hint = _hint(got, expected)
        open_at = _unclosed_brace(text, err.token.start_pos) if got in TOP_LEVEL else None
        if open_at:
            hint = (f"the `{{` on line {open_at} is not closed: is a `}}` missing before this "
                    f"line? (`{got}` starts a new declaration)")
        return PipelineError(f"unexpected `{got[:40]}`: expected {expected_words(expected)}",
                             line, column, hint=hint)
    if isinstance(err, UnexpectedCharacters):
        char = text[err.pos_in_stream] if err.pos_in_stream < len(text) else "?"
        hint = None
        if char == ".":
            hint = ("PTX instructions start with mbarrier, cp, fence, tcgen05, ld or st; "
                    "a register's field is written `pipe_state.index`")
        return PipelineError(f"unexpected character `{char}`", line, column, hint=hint)
    return PipelineError(str(err).splitlines()[0], line, column)


def _end_of_previous(text: str, pos: int) -> tuple[int, int] | None:
    """(line, column) just after the last character of code before `pos` (comments skipped)."""
    lines = text[:pos].split("\n")
    for back in range(len(lines) - 1, -1, -1):
        code = lines[back].split("//")[0].rstrip()
        if back == len(lines) - 1:
            code = lines[back].rstrip() if "//" not in lines[back] else code
        if code.strip():
            return back + 1, len(code) + 1
    return None


def _hint(got: str, expected) -> str | None:
    if "SEMICOLON" in expected:
        return "every declaration and instruction ends with `;`"
    if got in ("{", "}") and "RBRACE" not in expected:
        return "braces must pair up"
    return None
