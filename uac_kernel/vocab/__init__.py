"""Vocabulary: the concepts rules read, and each user's binding of them to their own names."""

from uac_kernel.vocab.binding import Binding, Vocabulary
from uac_kernel.vocab.catalogue import CONCEPTS, ROLES, Concept, concept, concepts, role

__all__ = ["CONCEPTS", "ROLES", "Binding", "Concept", "Vocabulary", "concept", "concepts", "role"]
