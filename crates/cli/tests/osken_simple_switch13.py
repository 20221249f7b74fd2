"""A MAC-learning switch for os-ken, in the style of Ryu's simple_switch_13 (the example
application every Ryu/os-ken user starts from), that `crates/cli/tests/controllers.rs` runs
against `rqvs switch --controller`.

On connection it installs the table-miss flow (priority 0, everything to the controller,
OFPCML_NO_BUFFER). On each PACKET_IN it learns the source MAC on the in_port; when the
destination is known it installs `priority=1,in_port,eth_src,eth_dst -> output` and sends the
packet there, else floods it (PACKET_OUT with the data: the switch buffers nothing). Each
PACKET_IN is printed as one line `packet_in dpid=... in_port=... src=... dst=... reason=...`,
flushed, so the test can count them.

os-ken 3 and later ship no `osken-manager` command; this file runs itself the way it did
(`AppManager.run_apps`):

    python3 osken_simple_switch13.py --ofp-listen-host 127.0.0.1 --ofp-tcp-listen-port PORT
"""

from os_ken.lib import hub

hub.patch(thread=False)

import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from os_ken import cfg, log  # noqa: E402
from os_ken.base import app_manager  # noqa: E402
from os_ken.controller import ofp_event  # noqa: E402
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls  # noqa: E402
from os_ken.lib.packet import ether_types, ethernet, packet  # noqa: E402
from os_ken.ofproto import ofproto_v1_3  # noqa: E402


class SimpleSwitch13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mac_to_port = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features_handler(self, ev):
        datapath = ev.msg.datapath
        ofproto = datapath.ofproto
        parser = datapath.ofproto_parser
        match = parser.OFPMatch()
        actions = [parser.OFPActionOutput(ofproto.OFPP_CONTROLLER, ofproto.OFPCML_NO_BUFFER)]
        self.add_flow(datapath, 0, match, actions)
        print(f"connected dpid={datapath.id:016x}", flush=True)

    def add_flow(self, datapath, priority, match, actions):
        ofproto = datapath.ofproto
        parser = datapath.ofproto_parser
        inst = [parser.OFPInstructionActions(ofproto.OFPIT_APPLY_ACTIONS, actions)]
        datapath.send_msg(parser.OFPFlowMod(datapath=datapath, priority=priority, match=match, instructions=inst))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in_handler(self, ev):
        msg = ev.msg
        datapath = msg.datapath
        ofproto = datapath.ofproto
        parser = datapath.ofproto_parser
        in_port = msg.match["in_port"]

        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        if eth.ethertype == ether_types.ETH_TYPE_LLDP:
            return
        dst, src = eth.dst, eth.src
        print(
            f"packet_in dpid={datapath.id:016x} in_port={in_port} src={src} dst={dst} "
            f"reason={msg.reason} total_len={msg.total_len} data_len={len(msg.data)}",
            flush=True,
        )

        ports = self.mac_to_port.setdefault(datapath.id, {})
        ports[src] = in_port
        out_port = ports.get(dst, ofproto.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out_port)]
        if out_port != ofproto.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_dst=dst, eth_src=src)
            self.add_flow(datapath, 1, match, actions)
        data = msg.data if msg.buffer_id == ofproto.OFP_NO_BUFFER else None
        out = parser.OFPPacketOut(
            datapath=datapath, buffer_id=msg.buffer_id, in_port=in_port, actions=actions, data=data
        )
        datapath.send_msg(out)


def main():
    log.early_init_log(logging.INFO)
    cfg.CONF(args=sys.argv[1:], project="os_ken")
    log.init_log()
    app_manager.AppManager.run_apps([os.path.abspath(__file__)])


if __name__ == "__main__":
    main()
