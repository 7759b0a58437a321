"""The one part of the build pyproject.toml cannot say: map the top-level `static/`, `templates/`
and `traces/` folders into the package as `app/static`, `app/templates` and `app/traces`.

They stay at the top of the repository (the UI has no build step and the GPU capture writes
traces/ in place), so the wheel gets them through `package_dir`; `app.resources` finds them
again at run time, installed or editable. The packages are listed here rather than with
`[tool.setuptools.packages.find]` because a find cannot be combined with extra mapped packages.
"""

from setuptools import find_packages, setup

DATA_DIRS = {"app.static": "static", "app.templates": "templates", "app.traces": "traces"}
"""Package name in the wheel -> folder at the top of the repository."""

ENGINE_DATA = ["**/*.json", "**/*.pipe", "**/*.lark", "**/*.md", "**/*.txt"]
"""Non-Python files of the engine's packages (schemas, pipelines, grammar, prelude, lessons)."""

setup(
    packages=[*find_packages(include=["app", "app.*"]), *DATA_DIRS],
    package_dir=DATA_DIRS,
    package_data={
        "app.static": ["**/*"],
        "app.templates": ["**/*"],
        "app.traces": ["*.json"],  # the traces and their measurements, not the raw GPU logs
        "app.scenarios": ENGINE_DATA,
        "app.lang": ENGINE_DATA,
        "app.sim": ENGINE_DATA,
        "app.export": ENGINE_DATA,
    },
)
