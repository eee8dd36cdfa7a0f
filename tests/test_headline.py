"""gpurisk.measures.headline: the headline measure and one intruder scenario per risk figure."""
from __future__ import annotations

from gpurisk.measures import headline
from gpurisk.plugins import measure_registry


def test_headline_estimates_E_and_is_registered():
    reg = measure_registry()
    assert headline.HEADLINE in reg and reg[headline.HEADLINE].cls.estimates == "matches"
    assert "matches" in reg                      # its truth, for validate
    for name in headline.BESIDE:
        assert name in reg and reg[name].cls.estimates == "tau1"


def test_every_scenario_is_one_line_of_a_known_measure():
    reg = measure_registry()
    plugin_measures = {"indiv_risk", "dis_suda"}          # from plugins or optional modules
    for name, text in headline.SCENARIOS.items():
        assert name in reg or name in plugin_measures, name
        assert "\n" not in text and 20 < len(text) <= 200, name
        assert headline.scenario(name) == text
    assert headline.scenario("no_such_measure") is None
    # the headline and what is beside it each have their scenario
    for name in (headline.HEADLINE, *headline.BESIDE, "matches_hat"):
        assert headline.scenario(name)
    # matches_hat is named a lower estimate of E, not E
    assert "lower estimate of E" in headline.scenario("matches_hat")


def test_a_plugin_measure_declares_its_own_scenario_and_assess_prints_it():
    """A measure class's ``scenario`` line (how a third-party plugin declares what its figure
    answers) is what assess prints under "what each figure answers" and puts in the JSON."""
    import json

    import numpy as np
    import pandas as pd

    from gpurisk import Measure, Result
    from gpurisk import hookimpl
    from gpurisk.plugins import register, unregister

    class Toy(Measure):
        name = "toy_scenario_measure"
        description = "n1 again"
        scenario = "toy: sample uniques, for an intruder who reads this very test"
        reads = "summary"

        def compute(self, table, ctx):
            return Result(value=float(table.n_r(1)))

    class _Plugin:
        @hookimpl
        def gpurisk_register_measures(self):
            return [Toy]

    register(_Plugin(), name="toy-scenario-plugin")
    try:
        assert headline.scenario("toy_scenario_measure") == Toy.scenario
        # every measure that declares a line of its own: one line, and the one scenario() gives
        for name, reg in measure_registry().items():
            own = reg.cls.scenario
            if own:
                assert "\n" not in own and 20 < len(own) <= 200, name
                assert headline.scenario(name) == own
        df = pd.DataFrame({"a": np.arange(30) % 7, "b": np.arange(30) % 3})
        import gpurisk
        res = gpurisk.assess(df, ["a", "b"], fraction=0.1, measures=["toy_scenario_measure"])
        assert res.to_dict()["scenarios"]["toy_scenario_measure"] == Toy.scenario
    finally:
        unregister("toy-scenario-plugin")
