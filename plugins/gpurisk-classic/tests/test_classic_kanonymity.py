"""k_anonymity against sdcMicro's counts on testdata (records with fk = 1: 330, fk = 2: 344 records in
172 cells; shared/data/README.md) and by hand."""
from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("gpurisk_classic")
import gpurisk  # noqa: E402

from classic_data import data_path  # noqa: E402


@pytest.mark.parametrize("k, records, cells", [(2, 330, 330), (3, 330 + 344, 330 + 172)])
def test_testdata_against_sdcmicro(k, records, cells):
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    res = gpurisk.assess(df, ["urbrur", "water", "sex", "age"], measures=["k_anonymity"],
                         options={"k_anonymity": {"k": k}}).measures["k_anonymity"]
    assert (res.extra["records_violating"], res.extra["cells_violating"], res.extra["k_achieved"]) \
        == (records, cells, 1)
    assert res.value == 1      # the k the file achieves: some cell holds one record
    assert res.extra["share_violating"] == pytest.approx(records / 4580)


def test_by_hand_and_bad_k():
    df = pd.DataFrame({"a": [1, 1, 1, 2, 2, 3, 3, 3, 3], "b": ["x"] * 9})
    res = gpurisk.assess(df, ["a", "b"], measures=["k_anonymity"]).measures["k_anonymity"]
    # cells of 3, 2 and 4 records: k achieved 2; at k = 3 the cell of 2 violates
    assert (res.value, res.extra["records_violating"], res.extra["cells_violating"],
            res.extra["k_achieved"], res.extra["k"]) == (2, 2, 1, 2, 3)
    res1 = gpurisk.assess(df, ["a"], measures=["k_anonymity"],
                          options={"k_anonymity": {"k": 1}}).measures["k_anonymity"]
    assert res1.value == 2 and res1.extra["records_violating"] == 0 and res1.extra["cells_violating"] == 0
    for bad in (0, 2.5, "3", True):
        with pytest.raises(gpurisk.BadInput, match="k_anonymity.k="):
            gpurisk.assess(df, ["a"], measures=["k_anonymity"], options={"k_anonymity": {"k": bad}})
