"""A training script shaped like Zeus's documented metric examples, importing ``zeus_nb``.

The three metrics are built with the documentation's keyword arguments (``prometheus_url=``, its
bucket tip) and used as it shows: a histogram per epoch, a gauge and a counter around the whole
run. The training and validation functions stand in for real ones. A ZeusMonitor window around
everything prints what the run consumed, for comparison with what reached the Pushgateway.
Run it with ``PUSHGATEWAY_URL`` set (default ``http://localhost:9091``).
"""

import os
import time

from zeus_nb.metric import EnergyCumulativeCounter, EnergyHistogram, PowerGauge
from zeus_nb.monitor import ZeusMonitor

PROMETHEUS_URL = os.environ.get("PUSHGATEWAY_URL", "http://localhost:9091")


def train_one_epoch(train_loader, model, optimizer, criterion, epoch, args):
    for _batch in train_loader:
        time.sleep(0.01)  # one training step


def validate(val_loader, model, criterion, args):
    for _batch in val_loader:
        time.sleep(0.005)  # one evaluation step
    return 50.0


if __name__ == "__main__":
    model = optimizer = criterion = args = None
    train_loader = range(10)
    val_loader = range(5)

    monitor = ZeusMonitor(gpu_indices=[0])
    energy_histogram = EnergyHistogram(
        cpu_indices=[0],
        gpu_indices=[0],
        prometheus_url=PROMETHEUS_URL,
        job="training_energy_histogram",
        gpu_bucket_range=[10.0, 25.0, 50.0, 100.0],
        cpu_bucket_range=[5.0, 15.0, 30.0, 50.0],
        dram_bucket_range=[2.0, 8.0, 20.0, 40.0],
    )
    power_gauge_metric = PowerGauge(
        gpu_indices=[0],
        update_period=2,
        prometheus_url=PROMETHEUS_URL,
        job="power_gauge_job",
    )
    cumulative_counter_metric = EnergyCumulativeCounter(
        cpu_indices=[0],
        gpu_indices=[0],
        update_period=2,
        prometheus_url=PROMETHEUS_URL,
        job="energy_counter_job",
    )

    monitor.begin_window("training")
    power_gauge_metric.begin_window("training_power")
    cumulative_counter_metric.begin_window("training_energy")

    for epoch in range(3):
        energy_histogram.begin_window("epoch_energy")
        train_one_epoch(train_loader, model, optimizer, criterion, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        energy_histogram.end_window("epoch_energy")
        print(f"Epoch {epoch} completed. Validation Accuracy: {acc1}%")

    cumulative_counter_metric.end_window("training_energy")
    power_gauge_metric.end_window("training_power")
    mes = monitor.end_window("training")
    print(f"Training consumed {mes.time} s and {mes.total_energy} J.")
