# Fetch a reference's payload on demand, then read it from the run's refs/.
result = call_tool("peer.reference", {})
print(result["content"][0]["text"])
ref = result["content"][1]
print("before fetch:", ref["savedTo"])
path = fetch(ref)
print("fetched to:", path)
read_text(path)
