"""Creates ACL bindings for the authorization benchmark, through
confluent-kafka's AdminClient (CreateAcls), on a broker started with
`--authorizer standard --allow-everyone-if-no-acl-found true`: COUNT
bindings for other users on other topics (half literal, half prefixed),
then ALLOW for User:ANONYMOUS (the load generator's PLAINTEXT principal) on
every topic starting with `bench` and on every group. The cluster resource
has no binding, so the load generator's idempotent producer is allowed by
the no-ACL default.

Usage: bench_acls.py BOOTSTRAP COUNT
"""
import sys

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

# Bindings per CreateAcls request (Kafka takes up to 10,000).
CHUNK = 1000
DEADLINE_S = 60


def binding(resource_type, name, pattern, principal, operation):
    return AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def main():
    bootstrap, count = sys.argv[1], int(sys.argv[2])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    bindings = [
        binding(ResourceType.TOPIC, f"team-{i % 8}-{i}",
                ResourcePatternType.LITERAL if i % 2 == 0 else ResourcePatternType.PREFIXED,
                f"User:user-{i % 100}", AclOperation.WRITE)
        for i in range(count)
    ]
    bindings += [
        binding(ResourceType.TOPIC, "bench", ResourcePatternType.PREFIXED, "User:ANONYMOUS", AclOperation.ALL),
        binding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, "User:ANONYMOUS", AclOperation.ALL),
    ]
    for start in range(0, len(bindings), CHUNK):
        for future in admin.create_acls(bindings[start:start + CHUNK]).values():
            future.result(timeout=DEADLINE_S)
    print(f"bindings={len(bindings)}")


if __name__ == "__main__":
    main()
