"""What pages of the apps below submissions show of a user's submissions, read here so that
those apps import nothing of submissions: the profile page's quotas (accounts)."""

from django import template

from submissions.quotas import QuotaUsage, quota_usage

register = template.Library()


@register.simple_tag
def user_quota(user) -> QuotaUsage:
    """The user's quotas and how much of each is used (submissions.quotas.quota_usage)."""
    return quota_usage(user=user)
