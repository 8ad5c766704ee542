from django.db.models import Count, Q
from django.shortcuts import render

from evaluation.models import Hardware, Runner


def hardware_list(request):
    """Each hardware with its runners (online or not, what they run) and its queue."""
    hardware = Hardware.objects.annotate(
        queued=Count("submissions", filter=Q(submissions__status="queued")),
        running=Count("submissions", filter=Q(submissions__status="running")),
    ).prefetch_related("runners")
    online_since = Runner.online_since()
    rows = []
    for item in hardware:
        runners = sorted(item.runners.all(), key=lambda r: (r.last_seen < online_since, r.name))
        rows.append(
            {
                "hardware": item,
                "runners": [{"runner": r, "online": r.last_seen >= online_since} for r in runners],
                "online": sum(r.last_seen >= online_since for r in runners),
            }
        )
    return render(request, "evaluation/hardware_list.html", {"rows": rows})
