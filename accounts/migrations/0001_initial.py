"""ApiToken moves here from the submissions app with its table (submissions_apitoken) and rows:
this migration only tells Django's state that the model is ours now (the table was made by
submissions 0001_initial; submissions 0012 forgets it there). Its content type moves with it,
so that permissions given on tokens and the admin's history of them stay attached."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def _move_content_type(apps, schema_editor, *, source: str, target: str) -> None:
    types = apps.get_model("contenttypes", "ContentType").objects.using(
        schema_editor.connection.alias
    )
    if types.filter(app_label=target, model="apitoken").exists():
        return  # made already; the stale one is left to remove_stale_contenttypes
    types.filter(app_label=source, model="apitoken").update(app_label=target)


def content_type_to_accounts(apps, schema_editor) -> None:
    _move_content_type(apps, schema_editor, source="submissions", target="accounts")


def content_type_to_submissions(apps, schema_editor) -> None:
    _move_content_type(apps, schema_editor, source="accounts", target="submissions")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("submissions", "0001_initial"),  # made the table
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(blank=True, max_length=100)),
                        ('prefix', models.CharField(db_index=True, max_length=12)),
                        ('key_hash', models.CharField(max_length=64, unique=True)),
                        ('scopes', models.JSONField(default=list)),
                        ('is_runner', models.BooleanField(default=False)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('revoked_at', models.DateTimeField(blank=True, null=True)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'submissions_apitoken',
                        'ordering': ['-created_at'],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_type_to_accounts, content_type_to_submissions),
    ]
