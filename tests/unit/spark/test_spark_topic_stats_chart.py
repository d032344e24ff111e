"""topic_stats' chart: a legend entry for every line drawn, whole-number ticks for counts."""
from __future__ import annotations

from datetime import datetime

import matplotlib.pyplot as plt

from spark_jobs.topic_stats import chart_figure


def test_every_line_has_a_legend_entry_and_counts_have_whole_ticks() -> None:
    rows = [{"topic": topic, "bucketStart": datetime(2024, 1, 1, 0, minute), "records": minute % 3 + 1,
             "bytes": 100 * minute}
            for topic in ("__consumer_offsets", "_schemas", "events") for minute in range(6)]
    fig = chart_figure(rows, "per minute", ("records", "bytes"))
    try:
        for ax in fig.axes:
            drawn = [line for line in ax.get_lines()]
            assert len(drawn) == 3
            assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["__consumer_offsets", "_schemas",
                                                                                "events"]
            assert all(float(tick).is_integer() for tick in ax.get_yticks())
    finally:
        plt.close(fig)
