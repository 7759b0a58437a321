"""Opcodes read against the instruction table: the rows every instruction family registers
(the `forms` of every `FAMILY` in app/sim/families; app/sim/isa.py says what a row holds), plus
the instructions of families the engine does not have yet.

An opcode is its stem (the leading words, in PTX's order: `mbarrier.try_wait.parity`), then
qualifiers in any order, each filling one slot of the form at most once. What is not modelled is
refused at its column, in words that tell a typo (`did you mean `.parity`?`) from a gap (`tensor
copies are not modelled yet`). `python -m app.lang.opcodes --write docs/language.md` puts the
instruction reference between that file's markers (tests/lang/test_isa.py checks it is current).
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field

from app.sim.families import FAMILIES as ENGINE_FAMILIES
from app.sim.isa import Form, Gap, Slot

from .errors import PipelineError

NOT_YET = (
    Gap("griddepcontrol", "9.7.13.13", "`griddepcontrol` is not modelled yet"),
    Gap("clusterlaunchcontrol", "9.7.13.17", "`clusterlaunchcontrol` is not modelled yet"),
    Gap("tensormap", "9.7.9.28", "tensor maps (`tensormap.*`) are not modelled yet"),
    Gap("tensormap.cp_fenceproxy", "9.7.13.16", "`tensormap.cp_fenceproxy` is not modelled yet"),
    Gap("atom", "9.7.13.5", "atomics (`atom`) are not modelled yet"),
    Gap("red", "9.7.13.6", "reductions (`red`) are not modelled yet"),
    Gap("mapa", "9.7.9.23", "`mapa` is an address function here, not an instruction",
        "write the address in the operand: `[mapa(empty_barrier[i], cta ^ 1)]`"),
    Gap("multimem", "9.7.9.14", "`multimem` instructions are not modelled yet"),
    Gap("multimem.cp.async.bulk", "9.7.9.26", "`multimem.cp.async.bulk` is not modelled yet"),
    Gap("nanosleep", "9.7.19.2", "`nanosleep` is not modelled yet",
        "a spin on `mbarrier.test_wait` needs no sleep: every schedule is explored"),
)
"""Instructions of families the engine does not have yet (named barriers, cluster barriers,
wgmma, ...): each moves into its family's `FAMILY.forms` when that family is written."""

FAMILIES = (*((f.name, f.forms) for f in ENGINE_FAMILIES if f.forms),
            ("families the engine does not have yet (app/lang/opcodes.py)", NOT_YET))
TABLE: tuple[Form | Gap, ...] = tuple(row for _, rows in FAMILIES for row in rows)
"""The instruction table: every form the engine models and every instruction it refuses."""
FORMS = tuple(row for row in TABLE if isinstance(row, Form))
GAPS = tuple(row for row in TABLE if isinstance(row, Gap))


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    forms: list[Form] = field(default_factory=list)
    gap: Gap | None = None
    stem: str = ""


def _trie() -> _Node:
    root = _Node()
    for row in TABLE:
        node = root
        for word in row.stem.split("."):
            node = node.children.setdefault(word, _Node())
        node.stem = row.stem
        if isinstance(row, Gap):
            node.gap = row
        else:
            node.forms.append(row)
    return root


ROOT = _trie()
VOCABULARY = frozenset(
    {v for f in FORMS for s in f.slots for v in s.values}
    | {w for row in TABLE for w in row.stem.split(".")}
    | {r[0] for f in FORMS for r in f.refuse})
"""Every word some instruction takes: a word outside it is a typo, one inside it is misplaced."""


@dataclass(frozen=True)
class Parsed:
    """An opcode read against its form: the qualifiers written, by slot, with their columns."""

    form: Form
    written: dict[str, str]
    columns: dict[str, int]

    def get(self, slot: str) -> str | None:
        """The qualifier written in `slot`, or None."""
        return self.written.get(slot)

    def value(self, slot: str) -> str | None:
        """The qualifier in `slot`, with PTX's default (or the language's stand-in) applied."""
        if slot in self.written:
            return self.written[slot]
        s = self.form.slot(slot)
        if s is not None:
            return s.default
        return dict(self.form.implied).get(slot)


def _dots(values) -> str:
    return " | ".join(f"`.{v}`" for v in values)


def _or(values) -> str:
    quoted = [f"`.{v}`" for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _ptx(section: str) -> str:
    return f"PTX {section}"


def parse(opcode: str, line: int, column: int) -> Parsed:
    """The form `opcode` names, with its qualifiers; a PipelineError at the offending word's
    column when the engine does not model what the opcode says."""
    words = opcode.split(".")
    cols = []
    at = column
    for word in words:
        cols.append(at)
        at += len(word) + 1

    def fail(message: str, i: int, hint: str | None = None) -> PipelineError:
        return PipelineError(message, line, cols[min(i, len(cols) - 1)], hint=hint)

    path = [ROOT]
    for word in words:
        child = path[-1].children.get(word)
        if child is None:
            break
        path.append(child)
    depth = len(path) - 1  # words consumed by the walk
    entry = max((k for k, node in enumerate(path) if node.forms or node.gap), default=0)
    node = path[entry]
    stop = path[-1]
    if depth < len(words) and stop.children:
        close = _closest(words[depth], _children(stop), 0.8)
        if close and not (node.forms and _is_qualifier(node.forms[0], words[depth])):
            if node.forms and depth == entry:
                raise fail(f"`.{words[depth]}` is not a qualifier of `{node.stem}`", depth,
                           f"did you mean `.{close}`?")
            raise fail(_unknown_instruction(words, depth), depth,
                       f"did you mean `{'.'.join([*words[:depth], close])}`?")
    if entry == 0 or (depth > entry and (node.gap is not None or _leads(stop))):
        raise _unknown(words, depth, stop, fail)
    if node.gap is not None:
        gap = node.gap
        hint = f"{gap.hint} ({_ptx(gap.section)})" if gap.hint else _ptx(gap.section)
        caret = max((k for k in range(1, entry) if _leads(path[k])), default=0)
        raise fail(gap.message, caret, hint)
    return _qualifiers(node, words, entry, cols, fail)


def _is_qualifier(form: Form, word: str) -> bool:
    return any(word in s.values for s in form.slots) or any(word == r[0] for r in form.refuse)


def _leads(node: _Node) -> bool:
    """Whether a modelled form starts with the words up to `node`."""
    return bool(node.forms) or any(_leads(c) for c in node.children.values())


def _children(node: _Node) -> list[str]:
    """The words that go on from `node`, modelled instructions first (for suggestions)."""
    return sorted(node.children, key=lambda w: (not _leads(node.children[w]), w))


def _closest(word: str, candidates, cutoff: float) -> str | None:
    """The candidate most like `word` (the first of equals), if any is alike enough."""
    best, score = None, cutoff
    for c in candidates:
        ratio = difflib.SequenceMatcher(None, word, c).ratio()
        if ratio > score or (best is None and ratio >= score):
            best, score = c, ratio
    return best


def _unknown_instruction(words, i: int) -> str:
    return f"`{'.'.join(words[:i + 1])}` is not an instruction the engine knows"


def _unknown(words, depth: int, stop: _Node, fail) -> PipelineError:
    """A word in the stem that no instruction has (or a stem cut short)."""
    if depth >= len(words):
        nexts = _children(stop)
        return fail(f"`{'.'.join(words)}` is not a whole instruction", len(words) - 1,
                    "it goes on with " + _or(nexts[:8]))
    options = _children(stop)
    close = _closest(words[depth], options, 0.6)
    if close:
        hint = f"did you mean `{'.'.join([*words[:depth], close])}`?"
    elif depth == 0:
        hint = "docs/language.md lists the instructions"
    else:
        hint = f"after `{'.'.join(words[:depth])}` PTX has " + _or(options[:10])
    return fail(_unknown_instruction(words, depth), depth, hint)


def _qualifiers(node: _Node, words, entry: int, cols, fail) -> Parsed:
    forms = node.forms
    first = forms[0]
    stem = node.stem
    written: dict[str, str] = {}
    columns: dict[str, int] = {}
    refuse = {r[0]: r for r in first.refuse}
    for i in range(entry, len(words)):
        word = words[i]
        slot = next((s for s in first.slots if word in s.values), None)
        if slot is not None and slot.name in written and slot.name in first.positional:
            slot = next((s for s in first.slots if word in s.values and s.name not in written
                         and s.name in first.positional), slot)
        if slot is not None:
            if slot.name in written:
                raise fail(f"`.{word}`: `{stem}` already has its `.{slot.name}` "
                           f"(`.{written[slot.name]}`)", i, f"PTX gives each slot one value: "
                           f"`.{slot.name}` = {_dots(slot.values)}")
            if not slot.models(word):
                raise fail(f"`.{word}` is not modelled", i, slot.note or None)
            written[slot.name] = word
            columns[slot.name] = cols[i]
            continue
        if word in refuse:
            _, message, hint = refuse[word]
            raise fail(message, i, hint)
        if word in node.children:
            rest = ".".join(w for w in words[entry:] if w != word)
            raise fail(f"`.{word}` comes right after `{stem}`", i,
                       f"write `{stem}.{word}" + (f".{rest}`" if rest else "`"))
        raise _not_a_qualifier(first, node, word, i, fail)
    for s in first.slots:
        if s.required and not s.may_omit and s.name not in written:
            raise fail(f"`{stem}` needs its `.{s.name}`: {_or(s.values)}", len(words) - 1,
                       f"{_ptx(first.section)}")
    for a, b in first.together:
        if (a in written) != (b in written):
            have, missing = (a, b) if a in written else (b, a)
            other = first.slot(missing)
            raise fail(f"`.{written[have]}` needs a `.{missing}` beside it ({_or(other.values)})",
                       words.index(written[have], entry),
                       f"{_ptx(first.section)}: qualifiers `.{a}` and `.{b}` must be specified "
                       "together")
    for form in forms:
        if all(written.get(s) in values for s, values in form.where):
            return Parsed(form, written, columns)
    slot_name = first.where[0][0]
    spaces = [v for f in forms for v in f.where[0][1] if v is not None]
    if slot_name not in written:
        raise fail(f"`{stem}` with no state space (generic addressing) is not modelled",
                   len(words) - 1, "write " + _or(spaces))
    raise fail(f"`.{written[slot_name]}` is not modelled here", words.index(
        written[slot_name], entry), "the engine models " + _or(spaces))


def _not_a_qualifier(form: Form, node: _Node, word: str, i: int, fail) -> PipelineError:
    stem = node.stem
    same = next((s for s in form.slots
                 if any(word in t.values for f in FORMS for t in f.slots if t.name == s.name)),
                None)
    if same is not None:
        return fail(f"`.{word}` is not a `.{same.name}` of `{stem}`", i,
                    f"{_ptx(form.section)}: its `.{same.name}` is {_or(same.values)}")
    candidates = [*_children(node), *(v for s in form.slots for v in s.values)]
    close = _closest(word, candidates, 0.6)
    if word in VOCABULARY:
        message = f"`{stem}` takes no `.{word}`"
    else:
        message = f"`.{word}` is not a qualifier of `{stem}`"
    if close:
        return fail(message, i, f"did you mean `.{close}`?")
    takes = "; ".join(_dots(s.values) for s in form.slots) or "none"
    return fail(message, i, f"its qualifiers ({_ptx(form.section)}): {takes}")


# ------------------------------------------------------------------------- the reference

def _slot_doc(slot: Slot, only: tuple | None = None) -> str | None:
    """A slot's modelled values as the reference shows them (None: the slot is all refused)."""
    values = [v for v in slot.values if slot.models(v) and (only is None or v in only)]
    if not values:
        return None
    notes = []
    if len(values) > 6:
        shown = f"`.{values[0]}` ... `.{values[-1]}`"
        notes.append(f"any of PTX's {len(values)}")
    else:
        shown = " \\| ".join(f"`.{v}`" for v in values)
    out = shown if slot.values == (slot.name,) else f"`.{slot.name}` {shown}"
    if slot.required and slot.may_omit:
        notes.append(f"may be left out: `.{slot.default}`" if slot.default else "may be left out")
    elif slot.required:
        notes.append("required")
    elif slot.default is not None:
        notes.append(f"default `.{slot.default}`")
    return out + (f" ({'; '.join(notes)})" if notes else "")


def _refused_doc(form: Form, only: dict) -> list[str]:
    out = []
    for slot in form.slots:
        values = [v for v in slot.values if not slot.models(v)]
        if slot.name in only:
            values = [v for v in values if v not in only[slot.name]]
        if not values:
            continue
        if len(values) == len(slot.values) and len(values) > 2:
            out.append(f"`.{slot.name}`")
        else:
            out.extend(f"`.{v}`" for v in values)
    out.extend(f"`.{r[0]}`" for r in form.refuse)
    return out


def _form_row(f: Form) -> str:
    only = {name: tuple(v for v in vs if v) for name, vs in f.where}
    where = "".join(f" ({', '.join(f'`.{v}`' for v in vs)})" for vs in only.values())
    quals = [d for s in f.slots if (d := _slot_doc(s, only.get(s.name))) is not None]
    rules = []
    if f.together:
        rules.append("; ".join(f"`.{a}` and `.{b}` together" for a, b in f.together))
    if f.remote:
        rules.append("no `mapa` operand")
    if f.remote_sink:
        rules.append("on a `mapa` barrier the destination is `_`")
    if f.flags:
        rules.append("`Line.flags`: " + ", ".join(f"`{x}`" for x in f.flags))
    refused = _refused_doc(f, only)
    if refused:
        rules.append("refused: " + " ".join(refused))
    cell = "<br>".join(quals + rules) or "none"
    operands = f"`{f.operands}`" if f.operands else ""
    return f"| `{f.stem}`{where} | {cell} | {operands} | {f.does} | {f.section} |"


def reference() -> str:
    """The instruction reference of docs/language.md, generated from the table."""
    out = ["Generated from the instruction table by `python -m app.lang.opcodes` (the rows each",
           "family registers in its module of app/sim/families; tests/lang/test_isa.py checks",
           "that this copy is current). Qualifiers follow the stem in any order, each slot at",
           "most once; braces mark optional operands; PTX's defaults apply to what is left out.",
           ""]
    for title, rows in FAMILIES:
        forms = [r for r in rows if isinstance(r, Form)]
        if not forms:
            continue
        out += [f"**{title[0].upper()}{title[1:]}**", "",
                "| instruction | qualifiers | operands | what the engine does | PTX |",
                "|---|---|---|---|---|", *(_form_row(f) for f in forms), ""]
    out += ["**Refused instructions** (PTX has them; the engine does not model them yet)", "",
            "| instruction | the message | PTX |", "|---|---|---|"]
    for _, rows in FAMILIES:
        out += [f"| `{g.stem}` | {g.message} | {g.section} |" for g in rows
                if isinstance(g, Gap)]
    return "\n".join(out) + "\n"


BEGIN = "<!-- BEGIN instruction reference"
END = "<!-- END instruction reference -->"


def with_reference(doc: str) -> str:
    """`doc` (docs/language.md) with the generated reference between its two markers."""
    head, sep, rest = doc.partition(BEGIN)
    marker, nl, rest = rest.partition("\n")
    _, end, tail = rest.partition(END)
    if not (sep and nl and end):
        raise ValueError("the reference's markers are missing")
    return f"{head}{BEGIN}{marker}\n{reference()}{END}{tail}"


def main(argv: list[str]) -> int:
    """`python -m app.lang.opcodes` prints the reference; `--write docs/language.md` puts it
    between that file's markers."""
    if argv[:1] == ["--write"] and len(argv) == 2:
        with open(argv[1], encoding="utf-8") as f:
            doc = f.read()
        with open(argv[1], "w", encoding="utf-8") as f:
            f.write(with_reference(doc))
        return 0
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
