"""A `unittest` test module rewritten as plain pytest functions, by its syntax tree: what the
bench's scripted model writes for a migration job's item (a real model writes its own).

Each TestCase method becomes a module-level function, its `self.assert…` calls plain asserts or
`pytest.raises`; what it cannot rewrite it refuses (ValueError), so a job whose tests use more
is found when the job is built, not scored wrong. Comments and layout are not kept: ast.unparse."""

from __future__ import annotations

import ast

COMPARISONS: dict[str, type[ast.cmpop]] = {
    "assertEqual": ast.Eq,
    "assertNotEqual": ast.NotEq,
    "assertIn": ast.In,
    "assertNotIn": ast.NotIn,
    "assertIs": ast.Is,
    "assertIsNot": ast.IsNot,
    "assertLess": ast.Lt,
    "assertLessEqual": ast.LtE,
    "assertGreater": ast.Gt,
    "assertGreaterEqual": ast.GtE,
}


def to_pytest(source: str) -> str:
    tree = ast.parse(source)
    body: list[ast.stmt] = []
    for node in tree.body:
        body += _module_statement(node)
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    if "pytest.raises" in ast.unparse(module):
        body.insert(_after_docstring(body), ast.Import(names=[ast.alias("pytest")]))
    if "unittest" not in {node.id for node in ast.walk(module) if isinstance(node, ast.Name)}:
        module.body = [node for node in module.body if not _imports_unittest(node)]
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


def _module_statement(node: ast.stmt) -> list[ast.stmt]:
    if isinstance(node, ast.ClassDef) and _is_test_case(node):
        return _functions_of(node)
    if _is_main_guard(node):
        return []
    return [node]


def _is_test_case(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base) in ("unittest.TestCase", "TestCase") for base in node.bases)


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)


def _imports_unittest(node: ast.stmt) -> bool:
    return isinstance(node, ast.Import) and [alias.name for alias in node.names] == ["unittest"]


def _functions_of(case: ast.ClassDef) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for node in case.body:
        if isinstance(node, ast.FunctionDef):
            if node.name in ("setUp", "tearDown", "setUpClass", "tearDownClass"):
                raise ValueError(f"{case.name}.{node.name}: fixtures are not rewritten")
            out.append(_function(node))
        elif isinstance(node, ast.If):  # methods defined only on some versions
            node.body = _functions_of(ast.ClassDef(case.name, [], [], node.body, []))
            node.orelse = _functions_of(ast.ClassDef(case.name, [], [], node.orelse, [])) if node.orelse else []
            out.append(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the class's docstring
        elif not isinstance(node, ast.Pass):
            raise ValueError(f"{case.name}: class-level {type(node).__name__} is not rewritten")
    return out


def _function(node: ast.FunctionDef) -> ast.FunctionDef:
    if not node.args.args or node.args.args[0].arg != "self":
        raise ValueError(f"{node.name}: a method without self")
    node.args.args = node.args.args[1:]
    node.body = _Rewriter().visit_block(node.body)
    if any(isinstance(name, ast.Name) and name.id == "self" for name in ast.walk(node)):
        raise ValueError(f"{node.name}: uses self beyond its asserts")
    return node


class _Rewriter(ast.NodeTransformer):
    def visit_block(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in statements:
            visited = self.visit(statement)
            out += visited if isinstance(visited, list) else [visited]
        return out

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(node, field, None), list):
                setattr(node, field, self.visit_block(getattr(node, field)))
        if isinstance(node, ast.Try):
            for handler in node.handlers:
                handler.body = self.visit_block(handler.body)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        name = _self_call(node.value)
        if name is None:
            return node
        assert isinstance(node.value, ast.Call)
        return _assert_of(name, node.value)

    def visit_With(self, node: ast.With) -> ast.stmt:
        for item in node.items:
            if _self_call(item.context_expr) == "assertRaises":
                call = item.context_expr
                assert isinstance(call, ast.Call)
                item.context_expr = _raises(call.args)
        return self.generic_visit(node)  # type: ignore[return-value]


def _self_call(node: ast.expr) -> str | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    ):
        return node.func.attr
    return None


def _assert_of(name: str, call: ast.Call) -> ast.stmt:
    args = call.args
    message = call.keywords[0].value if call.keywords and call.keywords[0].arg == "msg" else None
    if name in COMPARISONS and len(args) >= 2:
        test: ast.expr = ast.Compare(args[0], [COMPARISONS[name]()], [args[1]])
        message = message or (args[2] if len(args) > 2 else None)
    elif name in ("assertTrue", "assertFalse") and args:
        test = args[0] if name == "assertTrue" else ast.UnaryOp(ast.Not(), args[0])
        message = message or (args[1] if len(args) > 1 else None)
    elif name in ("assertIsNone", "assertIsNotNone") and args:
        test = ast.Compare(args[0], [ast.Is() if name == "assertIsNone" else ast.IsNot()], [ast.Constant(None)])
    elif name == "assertRaises" and len(args) >= 2:
        inner = ast.Expr(ast.Call(args[1], args[2:], call.keywords))
        return ast.With([ast.withitem(_raises(args[:1]))], [inner], None)
    else:
        raise ValueError(f"self.{name}(…) is not rewritten")
    return ast.Assert(test, message)


def _raises(args: list[ast.expr]) -> ast.Call:
    if len(args) != 1:
        raise ValueError("assertRaises as a context takes one exception here")
    return ast.Call(ast.Attribute(ast.Name("pytest", ast.Load()), "raises", ast.Load()), args, [])


def _after_docstring(body: list[ast.stmt]) -> int:
    has_docstring = body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    return 1 if has_docstring else 0
