"""The command line's tables of an evaluation's figures (ppl_models.experiments.tables), against text by hand;
figures on a tiny scale keep their digits."""

from ppl_models.experiments.tables import figure, format_table

METRICS = {
    "data": "toy data",
    "test_sequences": 2,
    "test_steps": 10,
    "loglik": {
        "exact": {"per_step": -1.23456, "per_sequence": -6.1728},
        "exact (true parameters)": {"per_step": -1.2, "per_sequence": -6.0},
    },
    "gap_to_truth": {"exact": {"gap_per_step": -0.03456, "standard_error_per_step": 0.01, "above_truth": False}},
    "skipped_estimators": {"smc": "no latent state"},
    "mse": 0.123456,
    "calibration": {"crps": 0.5},
    "calibration_source": "the exact predictive",
}


def test_the_text_table_lists_estimates_gaps_and_calibration_in_columns():
    width = len("exact (true parameters)") + 2
    assert format_table(METRICS).splitlines() == [
        "toy data: 2 test sequences, 10 steps",
        "estimator".ljust(width) + "nats / step".rjust(16) + "nats / sequence".rjust(18),
        "exact".ljust(width) + "-1.2346".rjust(16) + "-6.17".rjust(18),
        "exact (true parameters)".ljust(width) + "-1.2000".rjust(16) + "-6.00".rjust(18),
        "not estimated: smc (no latent state)",
        "",
        "gap to the truth: estimate minus exact (true parameters), nats per step, with its standard error",
        "exact".ljust(width) + "-0.0346".rjust(16) + "± 0.0100".rjust(18),
        "",
        "calibration: the exact predictive",
        "one-step mse".ljust(width) + "0.12346".rjust(16),
        "crps".ljust(width) + "0.5000".rjust(16),
    ]


def test_the_markdown_table_is_the_metrics_md_of_a_run():
    assert (
        format_table(METRICS, markdown=True)
        == "\n".join(
            [
                "# Results\n\ntoy data: 2 test sequences, 10 steps\n",
                "| estimator | nats / step | nats / sequence |",
                "|---|---:|---:|",
                "| exact | -1.2346 | -6.17 |",
                "| exact (true parameters) | -1.2000 | -6.00 |",
                "",
                "not estimated: smc (no latent state)",
                "",
                "Gap to the truth: estimate minus exact (true parameters), nats per step, with its standard error.",
                "",
                "| estimator | gap / step | standard error |",
                "|---|---:|---:|",
                "| exact | -0.0346 | 0.0100 |",
                "",
                "Calibration: the exact predictive.",
                "",
                "| metric | value |",
                "|---|---:|",
                "| one-step mse | 0.12346 |",
                "| crps | 0.5000 |",
            ]
        )
        + "\n"
    )


def test_a_table_without_calibration_or_truth_has_the_estimates_only():
    metrics = {
        "data": "d",
        "test_sequences": 1,
        "test_steps": 3,
        "loglik": {"elbo": {"per_step": -2.0, "per_sequence": -6.0}},
    }
    width = len("estimator") + 2
    assert format_table(metrics).splitlines() == [
        "d: 1 test sequences, 3 steps",
        "estimator".ljust(width) + "nats / step".rjust(16) + "nats / sequence".rjust(18),
        "elbo".ljust(width) + "-2.0000".rjust(16) + "-6.00".rjust(18),
    ]


def test_figures_on_a_tiny_scale_keep_their_digits():
    assert figure(1.2345e-13) == "1.234e-13" or figure(1.2345e-13) == "1.235e-13"
    assert figure(0.1234) == "0.1234" and figure(0.0) == "0.0000" and figure(-2.5) == "-2.5000"
    assert figure(0.0042, 5) == "0.00420" and figure(0.00042, 5) == "4.2000e-04"
    table = format_table(
        {
            "data": "d",
            "test_sequences": 1,
            "test_steps": 5,
            "mse": 3e-25,
            "loglik": {"exact": {"per_step": 27.1, "per_sequence": 135.5}},
            "calibration": {"crps": 4e-13, "coverage_0.8": 0.8},
        }
    )
    assert "3.0000e-25" in table and "4.000e-13" in table and "0.8000" in table
