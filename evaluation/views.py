from django.db.models import Count, Q
from django.shortcuts import render

from evaluation.models import Hardware, Runner


def hardware_list(request):
    """Each hardware with its runners and its queue.

    Online runners are listed with what they run; offline ones (each restart leaves one behind)
    are counted and folded away, newest heartbeat first.
    """
    hardware = Hardware.objects.annotate(
        queued=Count("submissions", filter=Q(submissions__status="queued")),
        running=Count("submissions", filter=Q(submissions__status="running")),
    ).prefetch_related("runners")
    online_since = Runner.online_since()
    rows = []
    for item in hardware:
        runners = list(item.runners.all())
        online = sorted((r for r in runners if r.last_seen >= online_since), key=lambda r: r.name)
        offline = sorted(
            (r for r in runners if r.last_seen < online_since),
            key=lambda r: r.last_seen,
            reverse=True,
        )
        rows.append(
            {
                "hardware": item,
                "online_runners": online,
                "offline_runners": offline,
                "online": len(online),
            }
        )
    return render(request, "evaluation/hardware_list.html", {"rows": rows})
