"""Tests of reading a study: the HTML report in headless Chromium, the trials table, the dashboard."""
