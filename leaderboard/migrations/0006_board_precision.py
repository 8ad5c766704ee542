# A board is one (problem, hardware, precision): best entries, records and board summaries are
# keyed by the board's precision, and the boards are recomputed from the evaluations, since a
# board of before mixed the precisions (a bf16 kernel ranked, and set records, on an fp32
# problem's board). The participants' summaries then count the main boards only.

from django.conf import settings
from django.db import migrations, models


def rebuild(apps, schema_editor):
    """Every board from the evaluations, as `manage.py leaderboard_rebuild` does, and the
    participants' summaries from the main boards (services' functions work on plain values and
    the models they are given, so they serve the historical models as well)."""
    from leaderboard.services import (
        SUMMARY_ENTRY_FIELDS,
        board_rows_of,
        boards_computed,
        summaries_of,
        summary_entries,
    )

    best_entry = apps.get_model("leaderboard", "BestEntry")
    record = apps.get_model("leaderboard", "Record")
    board_summary = apps.get_model("leaderboard", "BoardSummary")
    summary = apps.get_model("leaderboard", "ParticipantSummary")
    evaluation = apps.get_model("submissions", "Evaluation")

    entries, records, boards = boards_computed(
        board_rows_of(evaluation.objects.all()).iterator(chunk_size=2000),
        entry_model=best_entry, record_model=record, board_model=board_summary,
    )
    record.objects.all().delete()
    best_entry.objects.all().delete()
    board_summary.objects.all().delete()
    summary.objects.all().delete()
    best_entry.objects.bulk_create(entries, batch_size=2000)
    record.objects.bulk_create(records, batch_size=2000)
    board_summary.objects.bulk_create(boards, batch_size=2000)
    summary.objects.bulk_create(
        (
            summary(participant=participant, hardware_id=hardware_id, level=level, **fields)
            for (participant, hardware_id, level), fields in summaries_of(
                summary_entries(best_entry.objects.all())
                .values_list(*SUMMARY_ENTRY_FIELDS)
                .iterator(chunk_size=2000)
            ).items()
        ),
        batch_size=2000,
    )


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0007_delete_evaluation_delete_validation'),
        ('leaderboard', '0005_boardsummary'),
        ('problems', '0003_problem_status_held'),
        ('submissions', '0014_submission_backend_tilelang_cute_cutile'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='bestentry',
            name='unique_best_entry',
        ),
        migrations.RemoveConstraint(
            model_name='boardsummary',
            name='unique_board_summary',
        ),
        migrations.RemoveIndex(
            model_name='bestentry',
            name='best_entry_board',
        ),
        migrations.RemoveIndex(
            model_name='record',
            name='record_board',
        ),
        migrations.AddField(
            model_name='boardsummary',
            name='precision',
            field=models.CharField(default='', max_length=8),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='record',
            name='precision',
            field=models.CharField(default='', max_length=8),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='bestentry',
            name='precision',
            field=models.CharField(max_length=8),
        ),
        migrations.AddIndex(
            model_name='bestentry',
            index=models.Index(fields=['problem', 'hardware', 'precision', 'rank'], name='best_entry_board'),
        ),
        migrations.AddIndex(
            model_name='record',
            index=models.Index(fields=['problem', 'hardware', 'precision', 'achieved_at'], name='record_board'),
        ),
        migrations.AddConstraint(
            model_name='bestentry',
            constraint=models.UniqueConstraint(fields=('problem', 'hardware', 'precision', 'participant'), name='unique_best_entry'),
        ),
        migrations.AddConstraint(
            model_name='boardsummary',
            constraint=models.UniqueConstraint(fields=('problem', 'hardware', 'precision'), name='unique_board_summary'),
        ),
        migrations.RunPython(rebuild, migrations.RunPython.noop),
    ]
