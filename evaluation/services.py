from django.utils import timezone

from evaluation.models import Hardware, Runner

HARDWARE_FIELDS = (
    "name", "kind", "arch", "memory_bytes", "gpu_count", "driver_version", "torch_version",
    "cuda_version", "triton_version", "peak_bandwidth_gbs", "peak_tflops", "detected", "backends",
)


def hardware_register(*, slug: str, **detected) -> Hardware:
    """Create or update a Hardware from what a runner detected on its device."""
    defaults = {field: detected[field] for field in HARDWARE_FIELDS if field in detected}
    defaults = {k: v for k, v in defaults.items() if v is not None}
    hardware, _ = Hardware.objects.update_or_create(slug=slug, defaults=defaults)
    return hardware


def runner_heartbeat(
    *, name: str, hardware: Hardware, host: str, pid: int, device_index: int | None = None
) -> Runner:
    runner, created = Runner.objects.get_or_create(
        name=name,
        defaults={"hardware": hardware, "host": host, "pid": pid, "device_index": device_index},
    )
    if not created:
        Runner.objects.filter(pk=runner.pk).update(
            hardware=hardware, host=host, pid=pid, device_index=device_index,
            last_seen=timezone.now(),
        )
    return runner
