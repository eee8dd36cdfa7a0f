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
