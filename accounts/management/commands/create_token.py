"""`manage.py create_token USERNAME [--create-user]`: print a new API token for an agent."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiToken
from accounts.services import TokenError, api_token_create


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print its key (shown only this once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--create-user",
            action="store_true",
            help="Create the user (with no usable password) when it does not exist.",
        )
        parser.add_argument("--name", default="", help="A name to tell the token apart.")
        parser.add_argument(
            "--scopes",
            default=",".join(ApiToken.Scope.values),
            help="Comma-separated scopes (read, submit); both by default.",
        )

    def handle(self, *args, username: str, create_user: bool, name: str, scopes: str, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(
                    f"There is no user {username!r}; pass --create-user to create it."
                )
            user = User(username=username)
            user.set_unusable_password()
            user.full_clean(exclude=["password"])
            user.save()
            self.stderr.write(f"Created user {username}.")
        wanted = [scope.strip() for scope in scopes.split(",") if scope.strip()]
        try:
            token, key = api_token_create(
                user=user, name=name or "created by manage.py", scopes=wanted
            )
        except TokenError as error:
            raise CommandError(error.message) from None
        self.stderr.write(
            f"Token {token.prefix}… for {username} with scopes {', '.join(token.scopes)}; "
            "it is not shown again."
        )
        # The key alone on stdout, so that scripts can capture it.
        self.stdout.write(key)
