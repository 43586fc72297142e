"""The --where language of ``retain``: a small, safe expression language over one batch of rows.

A hand-written tokenizer and recursive-descent parser turn the text into a tree of NumPy
operations; nothing the user types is ever handed to eval, exec or the ast module, and
every name must be one of a fixed list.  Grammar (lowest precedence first)::

    expr       := and_expr ('or' and_expr)*
    and_expr   := not_expr ('and' not_expr)*
    not_expr   := 'not' not_expr | comparison
    comparison := arith (('<' | '<=' | '>' | '>=' | '==' | '!=') arith)*   # a < b < c chains
    arith      := term (('+' | '-') term)*
    term       := unary (('*' | '/' | '%') unary)*
    unary      := ('-' | '+') unary | atom
    atom       := NUMBER | STRING | NAME | FUNC '(' expr ')' | '(' expr ')'

Names: ``values``, ``indices_0`` ... ``indices_{K-1}``, ``nan``, ``inf``, ``true``, ``false``.
Functions: ``abs(x)``, ``isnan(x)``, and ``any(c)`` / ``all(c)``, which reduce a condition over
the dense block of a hybrid tensor's row (``values`` of a hybrid tensor is a block, so a
condition on it must be reduced by one of them).  Strings ('a' or "a", no escapes) compare
with string values.  The whole expression must be a condition: one bool per row.

Integer values and indices compute in int64 (uint64 values in uint64), floats in their type;
an overflow that NumPy refuses is a UsageError.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError

MAX_DEPTH = 64
MAX_LENGTH = 10_000

_NUMBER_RE = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("<=", ">=", "==", "!=", "<", ">", "(", ")", "+", "-", "*", "/", "%")
_KEYWORDS = ("and", "or", "not")
_FUNCTIONS = ("abs", "isnan", "any", "all")
_CONSTANTS = {"nan": ("num", math.nan), "inf": ("num", math.inf), "true": ("bool", True), "false": ("bool", False)}
_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
            "!=": np.not_equal}
_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "%": np.remainder}
_NUMERIC = ("num", "complex")
_HINTS = {"=": " (compare with '==')", "&": " (write 'and')", "|": " (write 'or')", "!": " (write 'not')",
          "~": " (write 'not')"}


def _fail(text: str, pos: int, message: str):
    raise UsageError(f"--where {text!r}: {message} at position {pos}")


@dataclass(frozen=True)
class Token:
    kind: str  # 'num', 'str', 'name', 'op', 'end'
    text: str
    pos: int
    value: object = None


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``; an unknown character is an error naming its position."""
    if len(text) > MAX_LENGTH:
        raise UsageError(f"--where expression is longer than {MAX_LENGTH} characters")
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        m = _NUMBER_RE.match(text, i)
        if m and (c.isdigit() or c == "."):
            end = m.end()
            if end < n and (text[end].isalnum() or text[end] in "_.'\""):
                _fail(text, end, f"unexpected {text[end]!r} after the number {m.group()!r}")
            lit = m.group()
            value = float(lit) if any(ch in lit for ch in ".eE") else int(lit)
            out.append(Token("num", lit, i, value))
            i = end
            continue
        m = _NAME_RE.match(text, i)
        if m:
            out.append(Token("name", m.group(), i))
            i = m.end()
            continue
        if c in "'\"":
            end = text.find(c, i + 1)
            if end < 0:
                _fail(text, i, "unterminated string")
            out.append(Token("str", text[i:end + 1], i, text[i + 1:end]))
            i = end + 1
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is None:
            hint = _HINTS.get(c, "")
            _fail(text, i, f"unexpected character {c!r}{hint}")
        out.append(Token("op", op, i))
        i += len(op)
    out.append(Token("end", "", n))
    return out


@dataclass
class Node:
    """A typed subtree: ``kind`` is num, complex, bool or str; ``block`` when it has one item per
    element of a hybrid row's dense block; ``const`` when it is a literal (``fn`` ignores env)."""

    kind: str
    block: bool
    fn: Callable
    pos: int
    const: bool = False


class Where:
    """A compiled --where condition: call it with (keys (K, n), values) to get a bool mask (n,)."""

    def __init__(self, text: str, root: Node, names: set, dense_ndim: int):
        self.text = text
        self.root = root
        self.names = names
        self.dense_ndim = dense_ndim

    @property
    def needs_values(self) -> bool:
        return "values" in self.names

    @property
    def needs_keys(self) -> bool:
        return any(n.startswith("indices_") for n in self.names)

    def __call__(self, keys: np.ndarray | None, values: np.ndarray | None, n: int) -> np.ndarray:
        if values is not None and values.dtype.kind in "iu" and values.dtype != np.uint64:
            values = values.astype(np.int64)  # integer arithmetic in int64, as for the indices
        env = {"keys": keys, "values": values, "n": n}
        try:
            with np.errstate(all="ignore"):
                out = self.root.fn(env)
        except (OverflowError, TypeError, ValueError, ZeroDivisionError) as e:
            raise UsageError(f"--where {self.text!r}: cannot evaluate: {e}") from None
        out = np.asarray(out, dtype=bool)
        if out.ndim == 0:
            return np.full(n, bool(out))
        return out


class _Parser:
    def __init__(self, text: str, sparse_ndim: int, value_kind: str | None, dense_ndim: int):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.K = sparse_ndim
        self.value_kind = value_kind
        self.dense_ndim = dense_ndim
        self.depth = 0
        self.names: set = set()

    # -- helpers ----------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def fail(self, message: str, pos: int | None = None):
        _fail(self.text, self.tok.pos if pos is None else pos, message)

    def found(self) -> str:
        return "the end of the expression" if self.tok.kind == "end" else repr(self.tok.text)

    def take_op(self, *ops) -> Token | None:
        t = self.tok
        if t.kind == "op" and t.text in ops:
            self.i += 1
            return t
        return None

    def take_word(self, word: str) -> Token | None:
        t = self.tok
        if t.kind == "name" and t.text == word:
            self.i += 1
            return t
        return None

    def expect_close(self, opened: Token):
        if not self.take_op(")"):
            self.fail(f"expected ')' to close the '(' at position {opened.pos}, found {self.found()}")

    def enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(f"the expression is nested more than {MAX_DEPTH} levels deep")

    # -- grammar ----------------------------------------------------------------------------
    def parse(self) -> Node:
        node = self.expr()
        if self.tok.kind != "end":
            self.fail(f"unexpected {self.found()}")
        if node.kind != "bool":
            self.fail("the expression must be a condition (e.g. values > 0), but it is a "
                      f"{'number' if node.kind in _NUMERIC else node.kind}", pos=0)
        if node.block:
            self.fail(f"values of a hybrid tensor is a block of {self.dense_ndim} dense dimension(s): "
                      "reduce the condition with any(...) or all(...)", pos=0)
        return node

    def expr(self) -> Node:
        self.enter()
        node = self.and_expr()
        while (t := self.take_word("or")) is not None:
            node = self.logical(np.logical_or, node, self.and_expr(), t)
        self.depth -= 1
        return node

    def and_expr(self) -> Node:
        node = self.not_expr()
        while (t := self.take_word("and")) is not None:
            node = self.logical(np.logical_and, node, self.not_expr(), t)
        return node

    def not_expr(self) -> Node:
        t = self.take_word("not")
        if t is None:
            return self.comparison()
        self.enter()
        a = self.not_expr()
        self.depth -= 1
        if a.kind != "bool":
            self.fail("'not' needs a condition", t.pos)
        fa = a.fn
        return Node("bool", a.block, lambda env: np.logical_not(fa(env)), t.pos, a.const)

    def comparison(self) -> Node:
        left = self.arith()
        result = None
        while (t := self.take_op(*_COMPARE)) is not None:
            right = self.arith()
            node = self.compare(t, left, right)
            result = node if result is None else self.logical(np.logical_and, result, node, t)
            left = right
        return left if result is None else result

    def arith(self) -> Node:
        node = self.term()
        while (t := self.take_op("+", "-")) is not None:
            node = self.arithmetic(t, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while (t := self.take_op("*", "/", "%")) is not None:
            node = self.arithmetic(t, node, self.unary())
        return node

    def unary(self) -> Node:
        t = self.take_op("-", "+")
        if t is None:
            return self.atom()
        self.enter()
        a = self.unary()
        self.depth -= 1
        if a.kind not in _NUMERIC:
            self.fail(f"unary {t.text!r} needs a number", t.pos)
        if t.text == "+":
            return a
        fa = a.fn
        if a.const:
            v = -fa({})
            return Node(a.kind, False, lambda env: v, t.pos, const=True)
        return Node(a.kind, a.block, lambda env: np.negative(fa(env)), t.pos)

    def atom(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            v = t.value
            return Node("num", False, lambda env: v, t.pos, const=True)
        if t.kind == "str":
            self.i += 1
            s = t.value
            return Node("str", False, lambda env: s, t.pos, const=True)
        if t.kind == "op" and t.text == "(":
            self.i += 1
            node = self.expr()
            self.expect_close(t)
            return node
        if t.kind == "name":
            self.i += 1
            return self.name(t)
        self.fail(f"expected a number, a name or '(', found {self.found()}")

    def name(self, t: Token) -> Node:
        word = t.text
        if word in _KEYWORDS:
            self.fail(f"{word!r} needs something before it", t.pos)
        if word in _FUNCTIONS:
            opened = self.take_op("(")
            if opened is None:
                self.fail(f"{word} is a function: write {word}(...)", t.pos)
            arg = self.expr()
            self.expect_close(opened)
            return self.function(word, arg, t)
        if self.tok.kind == "op" and self.tok.text == "(":
            self.fail(f"unknown function {word!r} (functions: {', '.join(_FUNCTIONS)})", t.pos)
        if word in _CONSTANTS:
            kind, v = _CONSTANTS[word]
            return Node(kind, False, lambda env: v, t.pos, const=True)
        if word == "values":
            if self.value_kind is None:
                self.fail("values of a binary tensor cannot be used in --where (use --mask)", t.pos)
            self.names.add(word)
            return Node(self.value_kind, self.dense_ndim > 0, lambda env: env["values"], t.pos)
        m = re.fullmatch(r"indices_(0|[1-9][0-9]*)", word)
        if m and int(m.group(1)) < self.K:
            k = int(m.group(1))
            self.names.add(word)
            return Node("num", False, lambda env: env["keys"][k], t.pos)
        self.fail(f"unknown name {word!r} (this tensor has {self.known_names()})", t.pos)

    def known_names(self) -> str:
        idx = "indices_0" if self.K == 1 else f"indices_0..indices_{self.K - 1}"
        return f"values, {idx}; constants nan, inf, true, false"

    # -- typed operations ------------------------------------------------------------------
    def _align(self, a: Node, b: Node):
        """Evaluators for a and b that broadcast a per-row array against a block."""
        fa, fb = a.fn, b.fn
        if a.block == b.block:
            return fa, fb
        d = self.dense_ndim

        def widen(f, const):
            if const:
                return f
            return lambda env: np.reshape(f(env), (-1,) + (1,) * d)

        return (widen(fa, a.const) if not a.block else fa), (widen(fb, b.const) if not b.block else fb)

    def logical(self, ufunc, a: Node, b: Node, t: Token) -> Node:
        for x in (a, b):
            if x.kind != "bool":
                self.fail(f"{t.text!r} needs conditions on both sides", t.pos)
        fa, fb = self._align(a, b)
        return Node("bool", a.block or b.block, lambda env: ufunc(fa(env), fb(env)), t.pos, a.const and b.const)

    def compare(self, t: Token, a: Node, b: Node) -> Node:
        op = t.text
        ka, kb = a.kind, b.kind
        if op in ("==", "!="):
            ok = (ka in _NUMERIC and kb in _NUMERIC) or ka == kb
        else:
            ok = (ka == kb == "num") or (ka == kb == "str")
            if ka == "complex" or kb == "complex":
                self.fail(f"complex numbers have no order for {op!r}: compare abs(values)", t.pos)
        if not ok:
            self.fail(f"cannot compare a {_kind_text(ka)} with a {_kind_text(kb)} using {op!r}", t.pos)
        ufunc = _COMPARE[op]
        fa, fb = self._align(a, b)
        if ka == "str":
            def fn(env):
                return np.asarray(ufunc(np.asarray(fa(env), dtype=object), fb(env)), dtype=bool)
        else:
            def fn(env):
                return ufunc(fa(env), fb(env))
        return Node("bool", a.block or b.block, fn, t.pos, a.const and b.const)

    def arithmetic(self, t: Token, a: Node, b: Node) -> Node:
        for x in (a, b):
            if x.kind not in _NUMERIC:
                self.fail(f"{t.text!r} needs numbers on both sides, not a {_kind_text(x.kind)}", t.pos)
        kind = "complex" if "complex" in (a.kind, b.kind) else "num"
        if t.text == "%" and kind == "complex":
            self.fail("'%' is not defined for complex numbers", t.pos)
        ufunc = _ARITH[t.text]
        fa, fb = self._align(a, b)
        if a.const and b.const:
            with np.errstate(all="ignore"):
                try:
                    v = ufunc(fa({}), fb({}))
                except (OverflowError, TypeError, ValueError) as e:
                    self.fail(f"cannot compute: {e}", t.pos)
            return Node(kind, False, lambda env: v, t.pos, const=True)
        return Node(kind, a.block or b.block, lambda env: ufunc(fa(env), fb(env)), t.pos)

    def function(self, word: str, a: Node, t: Token) -> Node:
        fa = a.fn
        if word == "abs":
            if a.kind not in _NUMERIC:
                self.fail(f"abs() needs a number, not a {_kind_text(a.kind)}", t.pos)
            return Node("num", a.block, lambda env: np.abs(fa(env)), t.pos, a.const)
        if word == "isnan":
            if a.kind not in _NUMERIC:
                self.fail(f"isnan() needs a number, not a {_kind_text(a.kind)}", t.pos)
            return Node("bool", a.block, lambda env: np.isnan(fa(env)), t.pos, a.const)
        if a.kind != "bool":
            self.fail(f"{word}() needs a condition, e.g. {word}(values > 0)", t.pos)
        if not a.block:
            return a
        reduce = np.any if word == "any" else np.all

        def fn(env):
            v = np.asarray(fa(env))
            return reduce(v.reshape(v.shape[0], -1), axis=1)

        return Node("bool", False, fn, t.pos)


def _kind_text(kind: str) -> str:
    return {"num": "number", "complex": "complex number", "bool": "condition", "str": "string"}[kind]


def value_kind(value_type: str) -> str | None:
    if value_type == "bool":
        return "bool"
    if value_type == "string":
        return "str"
    if value_type == "binary":
        return None
    if value_type.startswith("complex"):
        return "complex"
    return "num"


def compile_where(text: str, *, sparse_ndim: int, value_type: str, dense_ndim: int = 0) -> Where:
    """Parse ``text`` for a tensor of this layout; a UsageError names the position of any mistake."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError("--where needs a condition, e.g. 'values > 0 and indices_0 < 10'")
    p = _Parser(text, sparse_ndim, value_kind(value_type), dense_ndim)
    root = p.parse()
    return Where(text, root, p.names, dense_ndim)
