"""Norm-based signals of contrastive embeddings.

- :func:`raw_embeddings`: a SentenceTransformer's pooled vectors before its ``Normalize``
  (needs the ``nlp`` extra).
- :mod:`~neurips26.embeddings.dynamics`: the formula tying an embedding's norm to its
  accumulated tangential gradient energy (:func:`predicted_norms`, :class:`NormRecorder`).
- :class:`NormSignal`, :func:`fit_calibrator`, :func:`ece`: norms as a confidence signal in
  retrieval, calibrated with scikit-learn; :class:`NormConfidence`: that confidence for any
  sentence-transformers retriever in one line, its calibrator saved beside the model.

Nothing here imports sentence-transformers or scikit-learn until it is used.
"""

from .calibration import Calibrator, NormSignal, ReliabilityDiagram, ece, fit_calibrator, reliability_diagram
from .confidence import Hits, NormConfidence
from .dynamics import NormHistory, NormRecorder, predicted_norms, tangential_energy
from .losses import info_nce
from .raw import RawEmbeddings, raw_embeddings, unnormalized_modules

__all__ = [
    "raw_embeddings", "RawEmbeddings", "unnormalized_modules",
    "NormHistory", "NormRecorder", "predicted_norms", "tangential_energy", "info_nce",
    "NormSignal", "Calibrator", "fit_calibrator", "ece", "reliability_diagram", "ReliabilityDiagram",
    "NormConfidence", "Hits",
]
