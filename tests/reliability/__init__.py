"""Reliability and security: faults, hostile content, tenants, concurrency, crashes, bad config.

What each module proves, and the figures, are in docs/reliability.md.
"""
