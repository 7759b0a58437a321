"""Errors written for the person who typed the pipeline: the line, a caret under the column, what
was expected in words, and a hint where one helps (the Elm and Rust compilers' style)."""

from __future__ import annotations

TOKEN_WORDS = {
    "NAME": "a name", "INT": "a number", "STRING": 'a quoted string like "..."',
    "OPCODE": "a PTX instruction like `mbarrier.arrive`", "SEMICOLON": "`;`", "COMMA": "`,`",
    "LBRACE": "`{`", "RBRACE": "`}`", "LPAR": "`(`", "RPAR": "`)`", "LSQB": "`[`",
    "RSQB": "`]`", "EQUAL": "`=`", "DOT": "`.`", "ASSIGN_OP": "`+=` or similar",
    "ADDOP": "`+` or `-`", "MULOP": "`*`, `/` or `%`", "RELOP": "a comparison", "LESSTHAN": "`<`",
    "MORETHAN": "`>`", "COLON": "`:`", "QMARK": "`?`", "IN": "`in`", "BYTES": "`bytes`",
    "CHUNK": "`chunk`", "WITH": "`with`",
    "$END": "the end of the file",
}


class ParamError(ValueError):
    """Bad parameters or bug toggles for a pipeline; `field` names what was wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class PipelineError(ValueError):
    """A pipeline text that cannot be run: `line` and `column` are 1-based."""

    def __init__(self, message: str, line: int = 1, column: int = 1, hint: str | None = None,
                 limit: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = max(1, line)
        self.column = max(1, column)
        self.hint = hint
        self.limit = limit
        """The engine limit this program is past (`stages`, `agents`, ...), when that is why."""

    def render(self, source: str) -> str:
        """The message as a compiler prints it: `line:col`, the line, a caret, the hint."""
        lines = source.splitlines() or [""]
        text = lines[self.line - 1] if self.line <= len(lines) else ""
        gutter = f"{self.line} | "
        out = [f"{self.line}:{self.column}: {self.message}", gutter + text,
               " " * (len(gutter) + self.column - 1) + "^"]
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)

    def as_dict(self) -> dict:
        return {"message": self.message, "line": self.line, "column": self.column,
                "hint": self.hint}


def expected_words(expected) -> str:
    words = sorted({TOKEN_WORDS.get(name, _literal(name)) for name in expected})
    if len(words) > 6:
        words = words[:6] + ["..."]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _literal(name: str) -> str:
    return f"`{name.lower()}`" if name.isalpha() else name
