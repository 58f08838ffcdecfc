"""A DNS server for the SRV suite: answers from a zone file, on 127.0.0.1:53 (UDP and TCP).

    /usr/bin/python3 dns_server.py ZONE_FILE READY_FILE

Names of the zone get their records (NOERROR with no answer for another type); other names NXDOMAIN.
Writes READY_FILE once both listeners are up, then serves until killed. Needs Debian python3-dnslib
(scripts/setup), hence Debian's interpreter.
"""
import sys
import time

from dnslib import QTYPE, RCODE, RR
from dnslib.server import BaseResolver, DNSServer


class ZoneResolver(BaseResolver):
    def __init__(self, zone):
        self.records = RR.fromZone(zone)
        self.names = {str(rr.rname).lower() for rr in self.records}

    def resolve(self, request, handler):
        reply = request.reply()
        qname, qtype = str(request.q.qname).lower(), request.q.qtype
        for rr in self.records:
            if str(rr.rname).lower() == qname and (rr.rtype == qtype or qtype == QTYPE.ANY):
                reply.add_answer(rr)
        if not reply.rr and qname not in self.names:
            reply.header.rcode = RCODE.NXDOMAIN
        return reply


def main():
    zone_file, ready_file = sys.argv[1], sys.argv[2]
    with open(zone_file) as f:
        resolver = ZoneResolver(f.read())
    servers = [DNSServer(resolver, address="127.0.0.1", port=53, tcp=tcp) for tcp in (False, True)]
    for server in servers:
        server.start_thread()
    with open(ready_file, "w") as f:
        f.write("ready\n")
    while True:
        time.sleep(3600)


main()
