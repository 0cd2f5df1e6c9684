# Call several tools at once: one request, run concurrently by the host, results in order.
queries = ["trio", "httpx", "msgpack"]
results = call_tools([("docs.search", {"q": q}) for q in queries])
for q, r in zip(queries, results, strict=True):
    print(q, "->", r["content"][0]["text"])
len(results)
