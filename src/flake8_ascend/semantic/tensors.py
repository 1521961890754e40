"""Is this expression a torch tensor?  A small, local, conservative inference.

An expression counts as a tensor when it is built by a torch function
(``torch.randn(...)``, ``F.relu(...)``), is a name bound to such a value or a
parameter annotated ``torch.Tensor``, or is derived from a tensor by an
operator, an index, a tensor attribute (``.T``, ``.grad``) or a tensor method
that returns a tensor (``x.float()``).  Anything else (``pd.DataFrame(...)``,
``np.array(...)``, an unannotated parameter) is not known to be a tensor, so
rules that need a tensor receiver stay silent on it.
"""
from __future__ import annotations

import ast

# torch namespaces whose functions return tensors.
_TENSOR_NAMESPACES = ("torch.", "torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")

# torch.X functions that do not return a tensor.
_NOT_TENSOR_FUNCTIONS = frozenset(
    """device no_grad enable_grad inference_mode set_grad_enabled manual_seed seed initial_seed save load
    compile autocast typename numel finfo iinfo dtype Size broadcast_shapes Generator Tensor
    use_deterministic_algorithms get_default_dtype set_default_dtype set_printoptions is_tensor is_storage
    is_floating_point is_complex is_nonzero is_grad_enabled is_inference_mode_enabled get_num_threads
    set_num_threads chunk split unbind meshgrid tensor_split hsplit vsplit dsplit""".split()
)

# Tensor attributes that are tensors themselves.
_TENSOR_ATTRIBUTES = frozenset("T mT H mH data grad real imag".split())

# Tensor methods whose result is not a tensor.
_NOT_TENSOR_METHODS = frozenset(
    """item tolist numpy size dim ndimension numel nelement element_size is_contiguous data_ptr stride storage
    untyped_storage type get_device is_floating_point is_complex is_signed equal backward register_hook
    chunk split unbind tensor_split storage_offset is_pinned is_shared __len__ __repr__""".split()
)


def _torch_function(qualname: str) -> bool:
    for namespace in _TENSOR_NAMESPACES:
        name = qualname[len(namespace):]
        if not qualname.startswith(namespace) or "." in name:
            continue
        if name.startswith(("_", "is_", "set_", "get_")) or name in _NOT_TENSOR_FUNCTIONS:
            return False
        return namespace != "torch." or name.islower()
    return False


def is_tensor(node: ast.AST, resolver) -> bool:
    """True when ``node`` is known to evaluate to a torch tensor."""
    if isinstance(node, ast.Name):
        return resolver.is_tensor_name(node)
    if isinstance(node, ast.Call):
        func = node.func
        qualname = resolver.qualname(func)
        if qualname is not None:
            return _torch_function(qualname)
        if isinstance(func, ast.Attribute) and func.attr not in _NOT_TENSOR_METHODS:
            return is_tensor(func.value, resolver)
        return False
    if isinstance(node, ast.Attribute):
        return node.attr in _TENSOR_ATTRIBUTES and is_tensor(node.value, resolver)
    if isinstance(node, ast.Subscript):
        return is_tensor(node.value, resolver)
    if isinstance(node, ast.BinOp):
        return is_tensor(node.left, resolver) or is_tensor(node.right, resolver)
    if isinstance(node, ast.UnaryOp):
        return not isinstance(node.op, ast.Not) and is_tensor(node.operand, resolver)
    if isinstance(node, ast.IfExp):
        return is_tensor(node.body, resolver) and is_tensor(node.orelse, resolver)
    return False
