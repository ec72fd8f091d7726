"""The pytest plugin: a failing test that used a server gets the server's log in its report."""

from __future__ import annotations

from conftest import DATA

pytest_plugins = ["pytester"]


def test_a_failing_test_shows_the_server_log(pytester):
    pytester.makepyfile(
        f"""
        def test_uses_server(triton_server_factory):
            server = triton_server_factory({str(DATA / "repository")!r})
            assert server.returncode is None
            assert False, "deliberate failure"

        def test_passes_with_server(triton_server_factory):
            assert triton_server_factory({str(DATA / "repository")!r}).returncode is None
        """
    )
    result = pytester.runpytest_subprocess("-p", "orinkit.server.testing")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tritonserver log (last 60 lines*", "*Started GRPCInferenceService*"])
    # The passing test's report has no server log section.
    assert result.stdout.str().count("tritonserver log (last") == 1
