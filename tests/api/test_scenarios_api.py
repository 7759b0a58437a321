def test_catalogue_lists_the_built_ins_with_ranges_and_defaults(client):
    response = client.get("/api/v1/scenarios")
    assert response.status_code == 200
    scenarios = {s["id"]: s for s in response.json()["scenarios"]}
    assert list(scenarios)[:5] == ["single_barrier", "double_buffer_tma", "cluster_multicast",
                                   "kloop_tma_mma", "proxy_fence_store"]
    assert {s["group"] for s in list(scenarios.values())[5:]} == {"real_bugs"}
    assert all(s["source_url"] for s in list(scenarios.values())[5:])
    ring = scenarios["double_buffer_tma"]
    assert ring["parameters"]["stages"] == {"default": 2, "min": 1, "max": 16,
                                            "doc": "shared-memory stages in the ring"}
    assert ring["parameters"]["tiles"]["max"] == 100_000
    assert ring["parameters"]["consumers"]["max"] == 4
    assert "forget_phase_toggle" in ring["bugs"]
    assert all(s["lesson"] for s in scenarios.values())
    assert {t["name"] for t in ring["toggles"]} == set(ring["bugs"])
    assert all(t["description"] for s in scenarios.values() for t in s["toggles"])


def test_each_scenario_carries_the_pipeline_text_it_runs(client):
    import hashlib

    for scenario in client.get("/api/v1/scenarios").json()["scenarios"]:
        one = client.get(f"/api/v1/scenarios/{scenario['id']}").json()
        assert one["source"].lstrip().startswith("//")
        assert hashlib.sha256(one["source"].encode()).hexdigest() == one["source_sha256"]


def test_one_scenario_and_unknown_scenario(client):
    assert client.get("/api/v1/scenarios/kloop_tma_mma").json()["gpu"] is False
    response = client.get("/api/v1/scenarios/nope")
    assert response.status_code == 404
    assert "nope" in response.json()["detail"][0]["msg"]
