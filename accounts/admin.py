from django.contrib import admin

from accounts.models import ApiToken, EmailVerification, SignupAddress


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "scopes", "created_at", "revoked_at"]
    readonly_fields = ["key_hash", "prefix"]


@admin.register(EmailVerification)
class EmailVerificationAdmin(admin.ModelAdmin):
    """An operator may verify an address by hand (set "verified at") or see who is pending."""

    list_display = ["user", "email", "sent_at", "verified_at"]
    list_filter = [("verified_at", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "email"]
    raw_id_fields = ["user"]


@admin.register(SignupAddress)
class SignupAddressAdmin(admin.ModelAdmin):
    """Deleting an address's row lets it sign up again at once."""

    list_display = ["address", "recent"]
    search_fields = ["address"]
