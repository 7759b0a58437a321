"""The instruction table cannot drift from the engine: it is the union of the rows each family
registers (app/sim/isa.py), every form names a line kind the machine handles and the language
reads, every handler has a form, every row cites a PTX 9.1 section, and docs/language.md carries
the reference generated from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.lang import instructions, opcodes
from app.sim import isa, machine
from app.sim.families import FAMILIES

DOCS = Path(__file__).parents[2] / "docs" / "language.md"
NOT_INSTRUCTIONS = {"assign"}
"""Handler kinds no instruction names: `assign` is the register updates of one source line."""


def test_the_table_is_what_the_families_register():
    families = (*(f.forms for f in FAMILIES), opcodes.NOT_YET)
    assert opcodes.TABLE == tuple(row for rows in families for row in rows)
    assert all(isinstance(row, isa.Form | isa.Gap) for row in opcodes.TABLE)
    assert not any(isinstance(row, isa.Form) for row in opcodes.NOT_YET)


def test_every_form_names_a_line_kind_the_engine_handles():
    for form in opcodes.FORMS:
        assert form.kind in machine.HANDLERS, form.stem


def test_every_handler_kind_has_a_form():
    assert set(machine.HANDLERS) - NOT_INSTRUCTIONS == {f.kind for f in opcodes.FORMS}


def test_every_line_kind_has_an_operand_reader():
    assert set(instructions.READERS) == {f.kind for f in opcodes.FORMS}


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name.split(" (")[0])
def test_a_family_registers_forms_of_its_own_line_kinds(family):
    """A family's rows name exactly the kinds its own handlers run (one place per family)."""
    kinds = {f.kind for f in family.forms if isinstance(f, isa.Form)}
    assert kinds == set(family.handlers) - NOT_INSTRUCTIONS


def test_every_row_cites_a_ptx_91_section():
    for row in opcodes.TABLE:
        assert re.fullmatch(r"9\.7(\.\d+)+", row.section), row.stem
        assert row.section in isa.SECTIONS, (row.stem, row.section)
    for form in opcodes.FORMS:
        assert form.does and not form.does[0].isupper() and not form.does.endswith("."), \
            form.stem


def test_slots_are_well_formed():
    for form in opcodes.FORMS:
        names = [s.name for s in form.slots]
        assert len(names) == len(set(names)), form.stem
        words = [v for s in form.slots if s.name not in form.positional for v in s.values]
        assert len(words) == len(set(words)), f"{form.stem}: a qualifier fills one slot"
        assert set(form.positional) <= set(names), form.stem
        for s in form.slots:
            assert s.modelled is None or set(s.modelled) <= set(s.values), (form.stem, s.name)
            assert s.default is None or s.default in s.values, (form.stem, s.name)
            assert s.default is None or s.models(s.default), (form.stem, s.name)
            assert not s.may_omit or s.required, (form.stem, s.name)
        for a, b in form.together:
            assert form.slot(a) and form.slot(b), form.stem
        assert not {r[0] for r in form.refuse} & set(words), form.stem
        assert set(dict(form.implied)) <= {"sem", "scope"}
        assert not (form.implied and ({"sem", "scope"} & set(names))), form.stem


def test_forms_that_share_a_stem_share_its_slots_and_are_told_apart():
    by_stem: dict[str, list[isa.Form]] = {}
    for form in opcodes.FORMS:
        by_stem.setdefault(form.stem, []).append(form)
    for stem, forms in by_stem.items():
        if len(forms) == 1:
            continue
        assert all(f.slots == forms[0].slots for f in forms), stem
        spaces = [set(f.where[0][1]) for f in forms]
        assert all(f.where and f.where[0][0] == forms[0].where[0][0] for f in forms), stem
        assert sum(len(s) for s in spaces) == len(set().union(*spaces)), stem


def test_no_stem_is_both_modelled_and_refused():
    forms = {f.stem for f in opcodes.FORMS}
    gaps = [g.stem for g in opcodes.GAPS]
    assert len(gaps) == len(set(gaps))
    assert not forms & set(gaps)


def test_the_engine_line_carries_ptx_defaults():
    line = opcodes.parse("mbarrier.arrive.shared::cta.b64", 1, 1)
    assert (line.value("sem"), line.value("scope")) == ("release", "cta")
    wait = opcodes.parse("mbarrier.try_wait.parity.shared::cta.b64", 1, 1)
    assert (wait.value("sem"), wait.value("scope")) == ("acquire", "cta")
    load = opcodes.parse("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", 1, 1)
    assert (load.value("sem"), load.value("scope")) == ("release", "cluster")
    tx = opcodes.parse("mbarrier.complete_tx.shared::cta.b64", 1, 1)
    assert (tx.value("sem"), tx.value("scope")) == (None, None)


def test_docs_carry_the_generated_reference():
    text = DOCS.read_text()
    assert opcodes.with_reference(text) == text, (
        "docs/language.md's instruction reference is stale: run "
        "`.venv/bin/python -m app.lang.opcodes --write docs/language.md`")
    reference = opcodes.reference()
    for row in opcodes.TABLE:
        assert f"`{row.stem}`" in reference


def test_the_reference_module_runs(tmp_path, capsys):
    assert opcodes.main([]) == 0
    assert capsys.readouterr().out == opcodes.reference()
    doc = tmp_path / "language.md"
    doc.write_text(f"before\n{opcodes.BEGIN} -->\nold\n{opcodes.END}\nafter\n")
    assert opcodes.main(["--write", str(doc)]) == 0
    assert doc.read_text() == f"before\n{opcodes.BEGIN} -->\n{opcodes.reference()}" \
                              f"{opcodes.END}\nafter\n"
    with pytest.raises(ValueError, match="markers"):
        opcodes.with_reference("no markers")
