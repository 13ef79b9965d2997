"""Chart text (``render.chart_fit.chart_text``) of emoji sequences a person writes."""

from __future__ import annotations

from helpers.charts import svg, texts

from uac_kernel.render.charts import result_chart


def test_a_zwj_family_emoji_in_a_label_reads_as_the_emoji_not_as_escapes() -> None:
    """A trip labelled '👨‍👩‍👧 family trip' (man, ZWJ, woman, ZWJ, girl: one emoji) was drawn
    '👨\\u200d👩\\u200d👧 family trip': the zero-width joiner is escaped as an invisible
    character even inside an emoji sequence, where it is what joins the emoji."""
    label = "\U0001f468\u200d\U0001f469\u200d\U0001f467 family trip"
    drawn = texts(svg(result_chart({label: 3, "solo trip": 1}, "trips")))
    assert not any("\\u200d" in t for t in drawn), drawn
