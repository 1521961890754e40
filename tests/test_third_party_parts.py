"""third_party pieces: C++ operator scan, module naming, resolution cases, propagation, jedi."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flake8_ascend.config import Config
from flake8_ascend.library_analysis import analyse, cpp_ops
from flake8_ascend.library_analysis.callgraph import Graph, Node
from flake8_ascend.library_analysis.impact import Impact, RootCause
from flake8_ascend.library_analysis.layout import absolute, module_files

VERSION = "2.6.0"


def write_tree(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def affected(root: Path, category: str = "", jedi_seconds: float = 0) -> dict:
    """api -> sorted names of what it affects (of one category, or all)."""
    result = analyse(root, Config(VERSION), jedi_seconds=jedi_seconds)
    found = {}
    for index, cause in enumerate(result.impact.causes):
        if not category or cause.category == category:
            found[cause.api] = sorted(n for node in result.impact.affected(index) for n in result.names_of(node))
    return found


# -- C++ operators -----------------------------------------------------------------------------
def test_pybind_and_torch_library_operators_and_their_devices(tmp_path):
    write_tree(tmp_path, {
        "csrc/bind.cpp": """
            // m.def("ghost", &ghost);  a comment, not an operator
            /* PYBIND11_MODULE(fake, m) { m.def("also_ghost", &g); } */
            PYBIND11_MODULE(_C, m) {
              m.def("roll", &roll, "roll (CUDA)");
              m.def("version", &version);
              py::class_<Box>(m, "Box").def("area", &Box::area);
            }
            TORCH_LIBRARY(myops, m) {
              m.def("scale(Tensor x, float s) -> Tensor");
            }
            Tensor roll(Tensor x) { return roll_cuda(x); }
            std::string version() { return "1"; }
            """,
        "csrc/roll_kernel.cu": "Tensor roll_cuda(Tensor x) { return x; }\n",
        "csrc/impl_cuda.cpp": "TORCH_LIBRARY_IMPL(myops, CUDA, m) { m.impl(\"scale\", &scale_cuda); }\n",
        "csrc/impl_npu.cpp": "TORCH_LIBRARY_IMPL(myops, PrivateUse1, m) { m.impl(\"scale\", &scale_npu); }\n",
    })
    ops = cpp_ops.scan(tmp_path)
    assert sorted(ops.pybind) == ["roll", "version"] and sorted(ops.library) == ["myops::scale"]
    assert ops.modules == {"_C"} and not ops.extension_name
    roll = ops.pybind["roll"]
    assert (roll.file, roll.line) == ("csrc/bind.cpp", 5)
    assert roll.devices == {"CUDA": "csrc/roll_kernel.cu:1"} and roll.npu_implementation is None
    assert ops.pybind["version"].devices == {}
    scale = ops.library["myops::scale"]
    assert sorted(scale.devices) == ["CUDA", "NPU"] and scale.npu_implementation == "csrc/impl_npu.cpp:1"


def test_device_registrations_are_followed_from_the_binding(tmp_path):
    write_tree(tmp_path, {
        "ops/pybind.cpp": 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("nms", &nms); m.def("iou", &iou); }\n',
        "ops/nms.cpp": """
            Tensor nms_impl(Tensor b) { return DISPATCH_DEVICE_IMPL(nms_impl, b); }
            Tensor nms(Tensor b) { return nms_impl(b); }
            Tensor iou(Tensor b) { return iou_impl(b); }
            Tensor iou_impl(Tensor b) { return DISPATCH_DEVICE_IMPL(iou_impl, b); }
            """,
        "ops/cudabind.cpp": "REGISTER_DEVICE_IMPL(nms_impl, CUDA, n);\nREGISTER_DEVICE_IMPL(iou_impl, CUDA, i);\n",
        "ops/npu/nms_npu.cpp": "#define REGISTER_NPU_IMPL(key, value) x\nREGISTER_NPU_IMPL(nms_impl, nms_npu);\n",
    })
    ops = cpp_ops.scan(tmp_path)
    assert ops.extension_name
    assert ops.pybind["nms"].npu_implementation == "ops/npu/nms_npu.cpp:2"
    assert sorted(ops.pybind["iou"].devices) == ["CUDA"]


@pytest.mark.parametrize("rel, device", [
    ("a/b.cu", "CUDA"), ("csrc/npu/x.cpp", "NPU"), ("csrc/x_npu.cpp", "NPU"), ("csrc/cuda/k.cpp", "CUDA"),
    ("csrc/cpu/k.cpp", "CPU"), ("csrc/npuish/k.cpp", None), ("csrc/pybind.cpp", None),
])
def test_device_of_path(rel, device):
    assert cpp_ops.device_of_path(rel) == device


# -- module names ------------------------------------------------------------------------------
def test_module_names_follow_packages_and_src_layouts(tmp_path):
    files = ["src/lib/__init__.py", "src/lib/sub/__init__.py", "src/lib/sub/mod.py", "tests/test_x.py", "setup.py"]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    named = {m.rel: (m.module, m.is_package) for m in module_files(tmp_path, [tmp_path / f for f in files])}
    assert named == {"src/lib/__init__.py": ("lib", True), "src/lib/sub/__init__.py": ("lib.sub", True),
                     "src/lib/sub/mod.py": ("lib.sub.mod", False), "tests/test_x.py": ("tests.test_x", False),
                     "setup.py": ("setup", False)}
    inner = tmp_path / "src" / "lib"
    inner_files = [inner / "__init__.py", inner / "sub" / "__init__.py", inner / "sub" / "mod.py"]
    assert [m.module for m in module_files(inner, inner_files)] == ["lib", "lib.sub", "lib.sub.mod"]


@pytest.mark.parametrize("name, module, package, expected", [
    (".x", "a.b", False, "a.x"), ("..x.y", "a.b.c", False, "a.x.y"), (".x", "a", True, "a.x"),
    (".", "a.b", False, "a"), ("..x", "a", False, ""), ("abs.x", "a", False, "abs.x"),
])
def test_relative_names(name, module, package, expected):
    assert absolute(name, module, package) == expected


# -- resolution cases --------------------------------------------------------------------------
def test_class_header_and_module_level_uses_and_subclasses(tmp_path):
    write_tree(tmp_path, {
        "lib/__init__.py": "",
        "lib/par.py": """
            import torch
            WRAPPER = torch.nn.DataParallel

            class Wrapped(torch.nn.DataParallel):
                pass

            class Deeper(Wrapped):
                def forward(self, x):
                    return x

            def make(m):
                return Deeper(m)

            def wrap(m):
                return WRAPPER(m)
            """,
    })
    found = affected(tmp_path, "unsupported")["torch.nn.DataParallel"]
    # the alias binding runs nothing (its call in wrap does); the base class makes Wrapped a user
    assert found == ["lib.par.Deeper", "lib.par.Wrapped", "lib.par.make", "lib.par.wrap"]


def test_self_super_attribute_and_instance_calls(tmp_path):
    write_tree(tmp_path, {
        "lib/__init__.py": "",
        "lib/base.py": """
            import torch

            class Base:
                def step(self, x: torch.Tensor):
                    return x.mode()
            """,
        "lib/child.py": """
            from .base import Base

            class Child(Base):
                def step(self, x):
                    return super().step(x)

            class Holder:
                def __init__(self):
                    self.child = Child()

                def run(self, x):
                    return self.child.step(x)

                def again(self, x):
                    return self.run(x)

            def local(x):
                c = Child()
                return c.step(x)

            def unrelated(obj, x):
                return obj.step(x)

            def shadowed(Child, x):
                return Child(x)
            """,
    })
    found = affected(tmp_path, "unsupported")["torch.Tensor.mode"]
    assert found == ["lib.base.Base.step", "lib.child.Child.step", "lib.child.Holder.again",
                     "lib.child.Holder.run", "lib.child.local"]


def test_extension_handles_bound_through_global_and_torch_ops(tmp_path):
    write_tree(tmp_path, {
        "kernels/k.cpp": """
            PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("fast", &fast); }
            TORCH_LIBRARY(lib, m) { m.def("slow(Tensor x) -> Tensor", &slow); }
            Tensor fast(Tensor x) { return fast_cuda(x); }
            Tensor slow(Tensor x) { return slow_cuda(x); }
            """,
        "kernels/k.cu": "Tensor fast_cuda(Tensor x) { return x; }\nTensor slow_cuda(Tensor x) { return x; }\n",
        "lib/__init__.py": "",
        "lib/model.py": """
            import torch
            kernel = None

            def load_kernel():
                from torch.utils.cpp_extension import load
                global kernel
                kernel = load("fast_ext", ["k.cpp", "k.cu"])

            def use(x):
                return kernel.fast(x)

            def pick(x):
                chosen = kernel.fast
                return chosen(x)

            def other(x, module):
                return module.fast(x)

            def through_ops(x):
                return torch.ops.lib.slow(x)
            """,
    })
    found = affected(tmp_path, "cuda_op")
    assert found == {"fast": ["lib.model.pick", "lib.model.use"], "lib::slow": ["lib.model.through_ops"]}


def test_noqa_in_the_library_is_honoured(tmp_path):
    write_tree(tmp_path, {"lib/__init__.py": "", "lib/a.py": """
        import torch

        def wrap(m):
            return torch.nn.DataParallel(m)  # noqa: ASC101

        def wrap_again(m):
            return torch.nn.DataParallel(m)
        """})
    assert affected(tmp_path, "unsupported") == {"torch.nn.DataParallel": ["lib.a.wrap_again"]}


def test_jedi_settles_a_call_plain_resolution_leaves_open(tmp_path):
    write_tree(tmp_path, {
        "lib/__init__.py": "",
        "lib/work.py": """
            import torch

            class Worker:
                def run(self, x: torch.Tensor):
                    return x.mode()

            def make():
                return Worker()
            """,
        "lib/use.py": """
            from .work import make

            def go(x):
                worker = make()
                return worker.run(x)
            """,
    })
    assert "lib.use.go" not in affected(tmp_path, "unsupported", jedi_seconds=0)["torch.Tensor.mode"]
    assert "lib.use.go" in affected(tmp_path, "unsupported", jedi_seconds=20)["torch.Tensor.mode"]


# -- propagation -------------------------------------------------------------------------------
def _graph(edges, count):
    graph = Graph()
    for index in range(count):
        graph.add_node(Node(f"m.f{index}", "m.py", index + 1, "function"))
    for caller, callee in edges:
        graph.add_edge(caller, callee)
    return graph


def test_propagation_through_a_cycle_and_shortest_chains():
    # 0 -> 1 -> 2 -> 1 (cycle), 2 -> 3 (root cause), 4 -> 3, 5 isolated
    graph = _graph([(0, 1), (1, 2), (2, 1), (2, 3), (4, 3)], 6)
    impact = Impact(graph, [RootCause("unsupported", "torch.x", sites=[(3, 7)])])
    assert sorted(impact.affected(0)) == [0, 1, 2, 3, 4]
    assert impact.chain(0, 0) == ([0, 1, 2, 3], (3, 7))
    assert impact.causes_of(5) == []


def test_late_edges_propagate_only_what_is_new():
    graph = _graph([(0, 1)], 4)
    impact = Impact(graph, [RootCause("unsupported", "a", sites=[(2, 1)]), RootCause("unknown", "b", sites=[(3, 1)])])
    assert impact.causes_of(0) == []
    assert impact.add_edge(1, 2) and not impact.add_edge(1, 2)
    assert impact.causes_of(0) == [0]
    impact.add_edge(2, 3)
    assert impact.causes_of(0) == [0, 1] and impact.chain(0, 1)[0] == [0, 1, 2, 3]


def test_host_only_operators_guarded_imports_and_the_library_importing_itself_are_not_unsupported(tmp_path):
    write_tree(tmp_path, {
        "csrc/bind.cpp": 'PYBIND11_MODULE(_C, m) { m.def("version", &version); }\nint version() { return 1; }\n',
        "apex/__init__.py": "",
        "apex/info.py": """
            from . import _C
            from apex import normalization

            def version():
                return _C.version()
            """,
        "apex/fast.py": """
            def attention(q):
                import flash_attn
                return flash_attn.flash_attn_func(q, q, q)

            def maybe(q, use_flash):
                if use_flash:
                    from flash_attn import flash_attn_func
                    return flash_attn_func(q, q, q)
                return q
            """,
    })
    result = analyse(tmp_path, Config(VERSION), jedi_seconds=0)
    causes = [(c.api, c.blocking, [result.symbols.graph.nodes[n].name for n, _ in c.sites])
              for c in result.impact.causes]
    assert causes == [("version", False, ["apex.info.version"]), ("flash_attn", True, ["apex.fast.attention"]),
                      ("flash_attn", False, ["apex.fast.maybe"])]
    tips = [c.tips for c in result.impact.causes]
    assert tips[0].startswith("no device kernel found") and tips[2].startswith("imported only under an if or try")


def test_type_checks_and_annotations_are_not_uses(tmp_path):
    write_tree(tmp_path, {"lib/__init__.py": "", "lib/a.py": """
        import torch

        def unwrap(model):
            return model.module if isinstance(model, torch.nn.DataParallel) else model

        def typed(model: torch.nn.DataParallel) -> torch.nn.DataParallel:
            return model

        def wrap(model):
            return torch.nn.DataParallel(model)
        """})
    assert affected(tmp_path, "unsupported") == {"torch.nn.DataParallel": ["lib.a.wrap"]}


def test_names_from_a_star_import_are_followed(tmp_path):
    write_tree(tmp_path, {"lib/__init__.py": "", "lib/a.py": """
        import torch
        __all__ = ["wrap"]

        def wrap(m):
            return torch.nn.DataParallel(m)

        def hidden(m):
            return torch.nn.DataParallel(m)
        """, "lib/b.py": """
        from .a import *

        def go(m):
            return wrap(m)

        def other(m):
            return hidden(m)
        """})
    assert affected(tmp_path, "unsupported") == {"torch.nn.DataParallel": ["lib.a.hidden", "lib.a.wrap", "lib.b.go"]}


def test_jedi_follows_dependencies_in_env_folders(tmp_path):
    library = write_tree(tmp_path / "src", {
        "lib/__init__.py": "",
        "lib/work.py": """
            import torch

            class Worker:
                def run(self, x: torch.Tensor):
                    return x.mode()
            """,
        "lib/use.py": """
            from helperdep import build

            def go(x):
                return build().run(x)
            """,
    })
    env = write_tree(tmp_path / "site", {"helperdep/__init__.py": """
        from lib.work import Worker

        def build():
            return Worker()
        """})

    def reached(env_paths):
        result = analyse(library, Config(VERSION), env_paths=env_paths, jedi_seconds=20)
        index = next(i for i, c in enumerate(result.impact.causes) if c.api == "torch.Tensor.mode")
        return {result.symbols.graph.nodes[n].name for n in result.impact.affected(index)}

    assert "lib.use.go" not in reached([])
    assert "lib.use.go" in reached([env])
