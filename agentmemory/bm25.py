"""Okapi BM25, once: the reference store and every backend's keyword index score with these, in
this operation order, so their scores are equal float for float (the conformance suite checks).

Natural-log idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``, ``k1 = 1.2``, ``b = 0.75``. The
helpers take floats or numpy arrays alike, so an index can score many postings at once."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Set as AbstractSet
from typing import TypeVar

import numpy as np

K1 = 1.2
B = 0.75

Num = TypeVar("Num", float, np.ndarray)


def idf(n_docs: int, df: int) -> float:
    """Inverse document frequency of a term found in ``df`` of ``n_docs`` documents."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def length_norm(length: Num, avg_len: float) -> Num:
    """``k1 * (1 - b + b * length / avg_len)``: the document-length part of the denominator."""
    return K1 * (1 - B + B * length / avg_len)


def term_score(term_idf: float, tf: Num, norm: Num) -> Num:
    """One query term's contribution to a document with term frequency ``tf``."""
    return term_idf * tf * (K1 + 1) / (tf + norm)


def bm25(counts: Counter[str], terms: AbstractSet[str], df: dict[str, int], n_docs: int, avg_len: float) -> float:
    """BM25 of one document (its term ``counts``) for a set of query terms, summed in the set's
    order (indexes sum in the same order to get identical floats)."""
    norm = length_norm(float(sum(counts.values())), avg_len)
    score = 0.0
    for term in terms:
        tf = counts.get(term, 0)
        if tf:
            score += term_score(idf(n_docs, df[term]), float(tf), norm)
    return score
