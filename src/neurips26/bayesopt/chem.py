"""Molecules for latent-space BO (extra ``chem``: rdkit, selfies): a SELFIES codec over
SMILES that ship inside rdkit, and objectives computed with rdkit.

Objectives (maximized; each returns None for an unparsable SMILES):
* ``qed``: RDKit's quantitative estimate of drug-likeness;
* ``penalized_logp``: Crippen logP − synthetic accessibility (Ertl & Schuffenhauer's SA score
  from RDKit Contrib) − the number of atoms by which the largest ring exceeds 6, unnormalized
  (the form LOL-BO and most LSBO papers report);
* ``SimilarityMPO``: a GuacaMol-style multi-property objective re-implemented with rdkit: the
  geometric mean of a clipped Tanimoto similarity (Morgan radius 2, 2048 bits) to a target and
  Gaussian desirabilities of TPSA and logP.
"""

from __future__ import annotations

import math
import os
import sys
from functools import lru_cache

__all__ = ["nci_smiles", "selfies_codec", "smiles_tokens", "smiles_from_tokens", "qed", "penalized_logp",
           "SimilarityMPO", "canonical"]


def _rdkit():
    try:
        from rdkit import Chem, RDLogger
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise ImportError("molecular tasks need the 'chem' extra: pip install 'neurips26[chem]'") from exc
    RDLogger.DisableLog("rdApp.*")
    return Chem


def nci_smiles(max_tokens: int = 60) -> list[str]:
    """The 5,000 NCI SMILES shipped in rdkit (``rdkit/Data/NCI/first_5K.smi``), canonical,
    single-fragment, with a SELFIES of at most ``max_tokens`` tokens."""
    import selfies as sf
    from rdkit import RDConfig

    Chem = _rdkit()
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    out = []
    with open(path) as fh:
        for line in fh:
            smi = line.split()[0] if line.strip() else ""
            mol = Chem.MolFromSmiles(smi)
            if mol is None or "." in smi:
                continue
            can = Chem.MolToSmiles(mol)
            try:
                n = sf.len_selfies(sf.encoder(can))
            except Exception:  # noqa: BLE001 - SMILES that SELFIES cannot encode are skipped
                continue
            if n <= max_tokens:
                out.append(can)
    return out


def canonical(smiles: str) -> str | None:
    mol = _rdkit().MolFromSmiles(smiles) if smiles else None
    return None if mol is None or mol.GetNumAtoms() == 0 else _rdkit().MolToSmiles(mol)


def smiles_tokens(smiles: str) -> list[str]:
    """The SELFIES tokens of a SMILES string (``"CCO"`` → ``["[C]", "[C]", "[O]"]``):
    the ``to_tokens`` of the molecule codec. Raises what ``selfies.encoder`` raises for a
    SMILES that SELFIES cannot encode."""
    import selfies as sf

    return list(sf.split_selfies(sf.encoder(smiles)))


def smiles_from_tokens(tokens: list[str]) -> str | None:
    """The canonical SMILES of a list of SELFIES tokens, or None when they decode to no
    molecule: the ``from_tokens`` of the molecule codec, inverse of ``smiles_tokens`` up to
    canonicalization."""
    import selfies as sf

    return canonical(sf.decoder("".join(tokens)))


def selfies_codec(smiles: list[str], latent_dim: int = 16, vae=None):
    """A ``TokenCodec`` over the SELFIES alphabet of ``smiles`` (plus SELFIES' robust
    alphabet, so that every decode is a molecule), sequences up to the longest one."""
    import selfies as sf

    from .vae import TokenCodec

    alphabet = sorted(sf.get_alphabet_from_selfies(sf.encoder(s) for s in smiles) | sf.get_semantic_robust_alphabet())
    max_len = max(len(smiles_tokens(s)) for s in smiles) + 1
    return TokenCodec(alphabet, max_len, smiles_tokens, smiles_from_tokens, vae=vae, latent_dim=latent_dim)


def qed(smiles: str) -> float | None:
    from rdkit.Chem import QED

    mol = _rdkit().MolFromSmiles(smiles)
    return None if mol is None else float(QED.qed(mol))


@lru_cache(maxsize=1)
def _sascorer():
    from rdkit import RDConfig

    sys.path.insert(0, os.path.join(RDConfig.RDContribDir, "SA_Score"))
    import sascorer  # noqa: PLC0415 - RDKit ships it as a script directory, not a package

    return sascorer


def penalized_logp(smiles: str) -> float | None:
    from rdkit.Chem import Crippen

    mol = _rdkit().MolFromSmiles(smiles)
    if mol is None:
        return None
    rings = [len(r) for r in mol.GetRingInfo().AtomRings()]
    ring_penalty = max(0, max(rings, default=0) - 6)
    return float(Crippen.MolLogP(mol) - _sascorer().calculateScore(mol) - ring_penalty)


class SimilarityMPO:
    """geometric mean of [min(1, Tanimoto(x, target)/clip), G(TPSA; μ_tpsa, σ_tpsa),
    G(logP; μ_logp, σ_logp)], G(v; μ, σ) = exp(−½((v − μ)/σ)²)."""

    def __init__(self, target: str, clip: float = 0.6, tpsa=(90.0, 25.0), logp=(2.0, 1.0)):
        from rdkit.Chem import rdFingerprintGenerator

        mol = _rdkit().MolFromSmiles(target)
        if mol is None:
            raise ValueError(f"target {target!r} is not a valid SMILES")
        self.gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
        self.target_fp = self.gen.GetFingerprint(mol)
        self.clip, self.tpsa, self.logp = clip, tpsa, logp

    def __call__(self, smiles: str) -> float | None:
        from rdkit import DataStructs
        from rdkit.Chem import Crippen, rdMolDescriptors

        mol = _rdkit().MolFromSmiles(smiles)
        if mol is None:
            return None
        sim = DataStructs.TanimotoSimilarity(self.gen.GetFingerprint(mol), self.target_fp)
        parts = [min(1.0, sim / self.clip),
                 math.exp(-0.5 * ((rdMolDescriptors.CalcTPSA(mol) - self.tpsa[0]) / self.tpsa[1]) ** 2),
                 math.exp(-0.5 * ((Crippen.MolLogP(mol) - self.logp[0]) / self.logp[1]) ** 2)]
        return float(math.exp(sum(math.log(max(p, 1e-12)) for p in parts) / len(parts)))
