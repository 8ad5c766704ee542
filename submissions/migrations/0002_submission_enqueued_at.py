from django.db import migrations, models
from django.db.models import F


def mark_existing_as_enqueued(apps, schema_editor):
    # Rows made before this field existed had their task enqueued already; without this the
    # sweep for unqueued submissions would queue every old one a second time.
    Submission = apps.get_model("submissions", "Submission")
    Submission.objects.filter(enqueued_at__isnull=True).update(enqueued_at=F("created_at"))


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="submission",
            name="enqueued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(mark_existing_as_enqueued, migrations.RunPython.noop),
    ]
