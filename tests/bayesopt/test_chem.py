"""Molecular pieces of LSBO: the SELFIES codec round-trips rdkit's NCI molecules, the
objectives match their definitions term by term, bad SMILES give None, not an exception."""

import math

import pytest

pytest.importorskip("rdkit")
pytest.importorskip("selfies")
from rdkit import Chem  # noqa: E402
from rdkit.Chem import Crippen, rdMolDescriptors  # noqa: E402

from neurips26.bayesopt import chem  # noqa: E402


@pytest.fixture(scope="module")
def smiles():
    return chem.nci_smiles()


def test_nci_set_ships_with_rdkit_and_is_canonical(smiles):
    assert 4000 < len(smiles) <= 5000
    assert all(Chem.MolToSmiles(Chem.MolFromSmiles(s)) == s for s in smiles[:200])


def test_selfies_codec_round_trips(smiles):
    codec = chem.selfies_codec(smiles[:300], latent_dim=4)
    ids = codec.tensorize(smiles[:300])
    assert ids.shape == (300, codec.max_len)
    for s, row in zip(smiles[:300], ids.tolist()):
        toks = [codec.itos[i] for i in row if i > 2]
        assert chem.smiles_from_tokens(toks) == s


def test_penalized_logp_is_logp_minus_sa_minus_ring_penalty():
    sascorer = chem._sascorer()
    for smi, ring_penalty in (("c1ccccc1O", 0), ("C1CCCCCCC1", 2), ("CCN(CC)CC", 0)):
        mol = Chem.MolFromSmiles(smi)
        expected = Crippen.MolLogP(mol) - sascorer.calculateScore(mol) - ring_penalty
        assert math.isclose(chem.penalized_logp(smi), expected, rel_tol=1e-12)
    assert chem.penalized_logp("not a molecule") is None and chem.qed("C1CC") is None


def test_similarity_mpo_of_the_target_itself():
    target = "CC(=O)Oc1ccccc1C(=O)O"  # aspirin
    f = chem.SimilarityMPO(target, clip=0.6, tpsa=(90.0, 25.0), logp=(2.0, 1.0))
    mol = Chem.MolFromSmiles(target)
    g_tpsa = math.exp(-0.5 * ((rdMolDescriptors.CalcTPSA(mol) - 90) / 25) ** 2)
    g_logp = math.exp(-0.5 * ((Crippen.MolLogP(mol) - 2) / 1) ** 2)
    assert math.isclose(f(target), (1.0 * g_tpsa * g_logp) ** (1 / 3), rel_tol=1e-9)
    assert f("CCCCCCCCCC") < f(target)
    with pytest.raises(ValueError, match="SMILES"):
        chem.SimilarityMPO("C1CC")
