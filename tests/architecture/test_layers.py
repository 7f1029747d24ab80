"""The layer contract: every module sits in a declared layer and imports only downward,
and no two modules import each other, however indirectly."""

import ast

from tests.architecture.import_graph import (
    ROOT,
    cycles,
    import_edges,
    layer_of,
    layers,
    project_modules,
    upward_imports,
)


def test_every_module_belongs_to_a_declared_layer():
    unplaced = sorted(m for m in project_modules() if layer_of(m) is None)
    assert unplaced == [], "add these to [tool.layers] in pyproject.toml"


def test_imports_only_point_down():
    found = [f"{e.importer.replace('.', '/')}.py:{e.line} imports {e.imported}"
             for e in upward_imports()]
    assert found == []


def test_no_module_imports_itself_through_others():
    assert cycles() == []


def test_the_contract_sees_lazy_imports_too():
    # An import inside a function counts: bot.py imports the development runner at the
    # top today, but a lazy import of it from below would still be reported.
    lazy = [e for e in import_edges() if e.importer == "runner.dev_runner"]
    assert any(e.imported == "lib.log_privacy" for e in lazy)  # imported inside a function


def test_services_hold_provider_adapters_only():
    # An adapter knows its vendor and the layers below it, never a feature or the call.
    services = layer_of("services")
    above = {name for index, row in enumerate(layers()) if index < services for name in row}
    reaching_up = [e for e in import_edges()
                   if e.importer.startswith("services.") and e.imported.split(".")[0] in above]
    assert reaching_up == []
    modules = [m for m in project_modules() if m.startswith("services.")]
    assert modules and all(layer_of(m) == services for m in modules)


def test_only_the_call_setup_builds_a_production_pipeline():
    callers = set()
    for module, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("build_call_pipeline", "CallDeps")):
                callers.add(module)
    # The diagram builds the widest pipeline without running it, to print it.
    assert callers == {"runner.call_setup", "pipeline.diagram"}
    assert (ROOT / "bot.py").read_text().count("def ") == 1  # the runner entry alone
