"""The demo's (and soak's) throughput and peak-memory figures (``effectively_once_local.base.run_figures``)."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from effectively_once_local.base.run_figures import maxrss_mib, own_maxrss, record_peak, render, run_figures


def test_payments_per_second_is_payments_over_the_processing_time() -> None:
    figures = run_figures(payments=10_006, processing_seconds=400.0, runner_maxrss=0, poller_maxrss=0)
    assert figures["payments_per_second"] == pytest.approx(25.02)
    assert figures["processing_seconds"] == 400.0


@pytest.mark.parametrize(("platform", "ru_maxrss", "mib"), [("linux", 204_800, 200.0), ("darwin", 3 * 2**20, 3.0)])
def test_ru_maxrss_is_kibibytes_on_linux_and_bytes_on_macos(platform: str, ru_maxrss: int, mib: float) -> None:
    assert maxrss_mib(ru_maxrss, platform) == mib
    figures = run_figures(
        payments=1, processing_seconds=1.0, runner_maxrss=ru_maxrss, poller_maxrss=ru_maxrss // 2, platform=platform
    )
    assert figures["peak_rss_mib_runner"] == mib
    assert figures["peak_rss_mib_poller"] == mib / 2


def test_a_peak_never_measured_is_none_not_zero() -> None:
    figures = run_figures(payments=5, processing_seconds=2.0, runner_maxrss=1024, poller_maxrss=0)
    assert figures["peak_rss_mib_runner"] == 1.0
    assert figures["peak_rss_mib_poller"] is None


@pytest.mark.parametrize(("payments", "seconds"), [(-1, 1.0), (1, 0.0), (1, -3.0)])
def test_impossible_inputs_are_refused(payments: int, seconds: float) -> None:
    with pytest.raises(ValueError, match="payments|processing_seconds"):
        run_figures(payments=payments, processing_seconds=seconds, runner_maxrss=1, poller_maxrss=1)


def test_the_shared_poller_peak_keeps_the_highest_value_published() -> None:
    shared = mp.get_context("spawn").Value("q", 0)
    for value in (300, 900, 500):
        record_peak(shared, value)
    assert shared.value == 900
    record_peak(shared)  # this process's own ru_maxrss: a real figure, far above 900 KiB for a Python process
    assert shared.value == own_maxrss() > 900


def test_render_names_both_figures() -> None:
    line = render(run_figures(payments=30, processing_seconds=10.0, runner_maxrss=2048, poller_maxrss=4096))
    assert "3.0 payments/s" in line
    assert "runner 2.0 MiB" in line
    assert "largest poller 4.0 MiB" in line


def test_load_sampler_samples_the_load_average_between_start_and_stop() -> None:
    import time

    from effectively_once_local.base.run_figures import LoadSampler

    with LoadSampler(interval=0.05) as sampler:
        time.sleep(0.3)
    sampler.stop()  # a second stop takes no sample
    summary = sampler.summary()

    assert summary["samples"] == len(sampler.samples) >= 4
    assert summary["min"] <= summary["mean"] <= summary["max"]
    assert summary["cores"] and summary["cores"] >= 1


def test_the_run_figures_carry_the_load_and_render_it() -> None:
    load = {"min": 0.5, "mean": 1.25, "max": 2.0, "samples": 3, "cores": 2}
    figures = run_figures(payments=5, processing_seconds=2.0, runner_maxrss=1, poller_maxrss=1, load_average=load)

    assert figures["load_average"] == load
    assert render(figures).endswith("; load average 0.5 to 2.0 (mean 1.25, 2 cores)")
