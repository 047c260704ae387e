"""Caps on text answers, and the one exception the text package raises internally.

Every cap is at least as strict as wire.decode's for the same value: a parsed answer holds no
integer, exponent, node count, nesting or symbol count that a sandbox read-back could not hold.
The extra caps (message and expression length, tokens, factorials) bound the work of reading
text before any value exists.
"""

from __future__ import annotations

from exactgrade import wire

MAX_MESSAGE_CHARS = wire.MAX_BYTES  # a whole model message (1 MiB)
MAX_ANSWER_CHARS = wire.MAX_BYTES  # an extracted answer (a JSON object may hold a tensor)
MAX_EXPRESSION_CHARS = wire.MAX_STR_CHARS  # one expression, the longest string the wire carries
MAX_TOKENS = 4 * wire.MAX_SYMPY_NODES  # tokens of one expression
MAX_NODES = wire.MAX_SYMPY_NODES  # expression nodes, before any value is built
MAX_DEPTH = wire.MAX_DEPTH  # nesting of brackets, groups, powers and unary signs
MAX_INT_DIGITS = wire.MAX_INT_DIGITS  # digits of any integer (a literal, a numerator, a result)
MAX_EXPONENT = wire.MAX_EXPONENT  # |p| and q of a rational exponent; n of an n-th root
MAX_SYMBOLS = wire.MAX_SYMBOLS
MAX_FACTORIAL = 449  # the largest n whose n! has at most MAX_INT_DIGITS digits (449! has 998)
MAX_BITS = int(MAX_INT_DIGITS * 3.3219280948873626) + 1  # bits of a MAX_INT_DIGITS-digit integer


class TextError(ValueError):
    """Text that is not a readable answer; the message is the one-line reason."""
