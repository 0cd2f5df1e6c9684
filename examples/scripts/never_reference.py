# Meet a reference a server marked never: no uri, no path, a reason; fetch refuses.
ref = call_tool("peer.never_reference", {})["content"][0]
print("name:", ref["name"], "| savedTo:", ref["savedTo"], "| has uri:", "uri" in ref)
print("unfetchable:", ref["unfetchable"])
try:
    fetch(ref)
    outcome = "fetched (this must never happen)"
except Unfetchable as exc:
    outcome = "refused: " + str(exc)
outcome
