"""ApiToken now belongs to the accounts app (accounts 0001_initial), which keeps its table
submissions_apitoken and every row in it: only Django's state forgets the model here, and no
table is dropped."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0011_runsample"),
        # The model is in accounts' state before it leaves ours, so it is never missing from it.
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ApiToken")],
            database_operations=[],
        ),
    ]
