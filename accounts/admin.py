from django.contrib import admin

from accounts.models import ApiToken, SignupAddress


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "scopes", "created_at", "revoked_at"]
    readonly_fields = ["key_hash", "prefix"]


@admin.register(SignupAddress)
class SignupAddressAdmin(admin.ModelAdmin):
    """Deleting an address's row lets it sign up again at once."""

    list_display = ["address", "recent"]
    search_fields = ["address"]
