"""factbuoy's development runner for a Python plugin project, written by `factbuoy plugin run`
into the project's target/dev/ (not yours to edit).

componentize-py bundles this module instead of the project's app.py, with the modules the
project imports (listed below when it was built): the interpreter and they are compiled once.
Each call reads the project's own code from the folder the runtime maps read-only at
/factbuoy-sources, so an edit needs no new component: it runs at once.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import pkgutil
import sys
import traceback
from types import ModuleType
from typing import Any, Optional, Sequence

# The modules the project's code imports, other than its own: bundled now, as a build of
# app.py bundles them. One that cannot be imported fails in the project's code, at its import.
_IMPORTS: Sequence[str] = []  # factbuoy: imports

for _name in _IMPORTS:
    try:
        importlib.import_module(_name)
    except Exception:
        pass

import factbuoy_plugin  # noqa: E402
import wit_world.imports  # noqa: E402
from wit_world import exports  # noqa: E402

# Every interface's bindings, which the project's code may use through the SDK or directly.
for _module in pkgutil.iter_modules(wit_world.imports.__path__, "wit_world.imports."):
    importlib.import_module(_module.name)

_bundle: Optional[ModuleType]
try:
    from factbuoy_plugin import _bundle
except ImportError:  # an SDK without it
    _bundle = None

if _bundle is not None:
    # The SDK's sources into linecache now, while they are files (export() would at run time).
    _bundle.keep_sources()

SOURCES = "/factbuoy-sources"
# The module the project's app.py is loaded as ("app" is this one).
_APP = "_factbuoy_project_app"


class _SourcesFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the project's own modules in SOURCES and runs their code from there."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        name = "app" if fullname == _APP else fullname
        base = SOURCES + "/" + name.replace(".", "/")
        for file, package in ((base + "/__init__.py", True), (base + ".py", False)):
            try:
                open(file, "rb").close()
            except OSError:
                continue
            spec = importlib.util.spec_from_loader(fullname, self, origin=file, is_package=package)
            if spec is not None:
                spec.has_location = True
                if package:
                    spec.submodule_search_locations = [base]
            return spec
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        file = module.__spec__.origin if module.__spec__ else None
        assert file is not None
        with open(file, encoding="utf-8") as handle:
            source = handle.read()
        # Named as the project names it (app.py), in tracebacks and linecache alike.
        shown = file[len(SOURCES) + 1 :]
        linecache.cache[shown] = (len(source), None, source.splitlines(True), shown)
        exec(compile(source, shown, "exec", dont_inherit=True), module.__dict__)


def _project_plugin() -> Any:
    """The project's Plugin, from its app.py as it is now: every call runs in a fresh instance."""
    if _bundle is not None:
        _bundle.seal_imports()
    if not any(isinstance(f, _SourcesFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourcesFinder())
    try:
        app = importlib.import_module(_APP)
    except BaseException as error:
        # What a build would have printed: app.py failed while it was loaded. The host reports
        # the exception and its line from it.
        sys.stderr.write("".join(traceback.format_exception(error)))
        raise
    plugin = getattr(app, "Plugin", None)
    if plugin is None:
        raise AttributeError("app.py has no Plugin: end it with `Plugin = export(YourGatherer)`")
    return plugin()


class Plugin(exports.Plugin):
    def describe(self) -> Any:
        return _project_plugin().describe()

    def gather(self, params: Any) -> None:
        return _project_plugin().gather(params)
