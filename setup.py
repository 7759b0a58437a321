"""The one part of the build pyproject.toml cannot say: map the top-level `static/`, `templates/`
and `traces/` folders into the package as `app/static`, `app/templates` and `app/traces`.

They stay at the top of the repository (the UI has no build step and the GPU capture writes
traces/ in place), so the wheel gets them through `package_dir`; `app.resources` finds them
again at run time, installed or editable. Each data folder and its subfolders are listed as
packages (setuptools warns about data in folders it does not know), and the packages are listed
here rather than with `[tool.setuptools.packages.find]`, which cannot add mapped folders.
"""

from setuptools import find_namespace_packages, setup

ENGINE_DATA = ["*.json", "*.pipe", "*.lark", "*.md", "*.txt"]
"""Non-Python files of the engine's packages (schemas, pipelines, grammar, prelude, lessons)."""


def data_folder(package: str, folder: str, patterns: list[str], recursive: bool = True):
    """`folder` and its subfolders as `package` and its subpackages, with the files matching."""
    subfolders = find_namespace_packages(where=folder) if recursive else []
    packages = {package: folder}
    packages.update({f"{package}.{sub}": f"{folder}/{sub.replace('.', '/')}"
                     for sub in subfolders})
    return packages, dict.fromkeys(packages, patterns)


static, static_files = data_folder("app.static", "static", ["*"])
templates, template_files = data_folder("app.templates", "templates", ["*"])
traces, trace_files = data_folder("app.traces", "traces", ["*.json"], recursive=False)
"""The traces and their measurements, not the raw GPU logs under traces/raw/."""
kernels, kernel_files = data_folder("app.traces.raw", "traces/raw", ["*.cu"], recursive=False)
"""The kernels that ran (each replay page links its own), without the raw logs beside them."""

docs, doc_files = data_folder("app.docs", "docs", ["language.md", "semantics.md"], recursive=False)
"""The references /reference/language and /reference/semantics render (app/web/reference.py)."""

code = find_namespace_packages(include=["app", "app.*"], exclude=["*__pycache__*"])
"""Namespace discovery, so that a data-only subfolder (app/lang/prelude/) ships its files too."""

setup(
    packages=[*code, *static, *templates, *traces, *kernels, *docs],
    package_dir={**static, **templates, **traces, **kernels, **docs},
    package_data={
        **dict.fromkeys(code, ENGINE_DATA),
        **static_files, **template_files, **trace_files, **kernel_files, **doc_files,
    },
)
