//! The metrics endpoint's text (Prometheus exposition): everything a scrape shows, rendered from the event
//! loop's counters on the scrape only (`docs/OPERATIONS.md` lists each metric).

use super::*;

impl<P: Protocol> EventLoop<P> {
    /// Everything the metrics endpoint shows, as Prometheus text (`docs/OPERATIONS.md` lists it). Runs on
    /// a scrape only; the hot path keeps plain counters.
    pub(super) fn render_metrics(&self) -> String {
        let mut t = Text::new(self.node_id);
        let durable = self.durable.as_ref();
        let info = "snowline_server_info";
        t.family(info, "gauge", "Always 1; the labels say which protocol the node runs and whether it is durable.");
        t.sample(info, &[("protocol", P::NAME), ("mode", if durable.is_some() { "durable" } else { "memory" })], 1);
        t.single(
            "snowline_uptime_seconds",
            "gauge",
            "Seconds since the server process started serving.",
            self.started.elapsed().as_secs_f64(),
        );

        let received = "snowline_messages_received_total";
        t.family(received, "counter", "Messages from the network handed to hosted servers, by sender role and kind.");
        for (from, counts) in
            [("client", &self.counters.received_from_clients), ("server", &self.counters.received_from_servers)]
        {
            for (kind, n) in counts.sorted() {
                t.sample(received, &[("from", from), ("kind", kind)], n);
            }
        }
        let sent = "snowline_messages_sent_total";
        t.family(
            sent,
            "counter",
            "Messages sent to other processes, by receiver role and kind (to clients: the replies; retransmissions included).",
        );
        for (to, counts) in [("client", &self.counters.sent_to_clients), ("server", &self.counters.sent_to_servers)] {
            for (kind, n) in counts.sorted() {
                t.sample(sent, &[("to", to), ("kind", kind)], n);
            }
        }
        t.single(
            "snowline_client_replies_dropped_total",
            "counter",
            "Messages to clients dropped because the client has no connection to this process any more.",
            self.counters.client_replies_dropped,
        );
        t.single(
            "snowline_invalid_inputs_total",
            "counter",
            "Messages refused as invalid input (answered with an Error frame).",
            self.invalid_inputs,
        );
        t.single(
            "snowline_contract_violations_total",
            "counter",
            "Effects of hosted servers that broke the driver contract and were dropped (a protocol bug).",
            self.contract_violations,
        );
        t.single(
            "snowline_refused_requests_total",
            "counter",
            "Client requests refused because the disk is full (answered with a Refused frame).",
            self.counters.refused_disk_full,
        );
        t.single(
            "snowline_replies_noted_total",
            "counter",
            "Replies to clients that report how their operation went (cure, av, op, cv: every answer; 2pl: reads, commits and releases; the other protocols' clients assemble outcomes themselves and report none).",
            self.counters.replies_noted,
        );
        t.single(
            "snowline_replies_rejected_total",
            "counter",
            "Of those, operations refused without effect (bad input, an offer the protocol lacks, a snapshot older than the garbage-collection horizon).",
            self.counters.replies_rejected,
        );
        let aborts = "snowline_aborts_total";
        t.family(aborts, "counter", "Of those, transaction aborts, by cause.");
        for cause in snowline_core::AbortCause::ALL {
            t.sample(aborts, &[("cause", cause.name())], self.counters.aborts.get(cause.name()));
        }
        t.histogram(
            "snowline_blocked_seconds",
            "Of those, the time each request waited at the servers (locks, snapshots, stabilisation), as the reply reports it.",
            &self.counters.blocked,
        );
        t.histogram(
            "snowline_handler_seconds",
            "Time to hand one message from the network to its server and carry out its effects (durable: its log append, not the commit).",
            &self.counters.handler,
        );

        let versions: usize = match durable {
            Some(d) => d.host.servers().map(|(_, s)| s.stored_versions()).sum(),
            None => self.hosted.iter().map(|h| h.node.stored_versions()).sum(),
        };
        t.single(
            "snowline_versions_stored",
            "gauge",
            "Versions the hosted servers hold (ServerNode::stored_versions, summed).",
            versions,
        );

        let conns = "snowline_connections";
        t.family(conns, "gauge", "Inbound connections past their Hello, by role.");
        let clients = self.conns.values().filter(|(_, _, from, _)| matches!(from, Addr::Client(_))).count();
        t.sample(conns, &[("role", "client")], clients);
        t.sample(conns, &[("role", "server")], self.conns.len() - clients);
        t.single(
            "snowline_inbound_connections_open",
            "gauge",
            "Inbound connections open, handshake done or not.",
            self.shared.open_conns.load(Ordering::Relaxed),
        );
        let census = self.shared.admission.census();
        t.single(
            "snowline_handshaking_connections",
            "gauge",
            "Inbound connections accepted and not yet past their Hello (TLS handshake included).",
            census.handshaking,
        );
        let (mut requests, mut request_bytes) = (0, 0);
        for (_, q, _, _) in self.conns.values() {
            let (n, bytes) = q.in_flight();
            requests += n;
            request_bytes += bytes;
        }
        t.single(
            "snowline_requests_in_flight",
            "gauge",
            "Client requests read and not yet answered, over all connections (each connection's budget: docs/ARCHITECTURE.md, Limits).",
            requests,
        );
        t.single("snowline_requests_in_flight_bytes", "gauge", "Bytes of the frames of those requests.", request_bytes);
        let replies: usize = self.conns.values().map(|(_, q, _, _)| q.queued()).sum();
        t.single(
            "snowline_reply_queue_frames",
            "gauge",
            "Frames queued on inbound connections and not yet written (replies to clients).",
            replies,
        );
        let peer_queue = "snowline_peer_queue_frames";
        t.family(
            peer_queue,
            "gauge",
            "Frames queued on the outbound link to each peer node and not yet written (held for emulated latency, or while the peer is unreachable).",
        );
        for (i, link) in self.peers.iter().enumerate() {
            if let Some(link) = link {
                let queued = link.queued.saturating_sub(link.taken.load(Ordering::Relaxed));
                t.sample(peer_queue, &[("peer", &self.config.nodes[i].id.to_string())], queued);
            }
        }
        let unacked = "snowline_link_unacked_messages";
        t.family(
            unacked,
            "gauge",
            "Messages on each sequenced link from a hosted server that its receiver has not acknowledged.",
        );
        let backlogs: Vec<(ServerId, ServerId, usize)> = match durable {
            Some(d) => d.host.backlogs().collect(),
            None => self.links.backlogs().collect(),
        };
        for (from, to, n) in backlogs {
            t.sample(unacked, &[("from", &from.to_string()), ("to", &to.to_string())], n);
        }

        let log = durable.map(|d| d.host.log().stats()).unwrap_or_default();
        t.single(
            "snowline_log_records_total",
            "counter",
            "Durable mode: records appended to the log (0 in memory).",
            log.records,
        );
        t.single(
            "snowline_log_bytes_total",
            "counter",
            "Durable mode: payload bytes appended to the log (0 in memory).",
            log.bytes,
        );
        t.single(
            "snowline_log_commits_total",
            "counter",
            "Durable mode: log write transactions committed (records, checkpoints, truncations; 0 in memory).",
            log.commits,
        );
        t.single(
            "snowline_log_fsyncs_total",
            "counter",
            "Durable mode: log commits made durable with an fsync (all but under --fsync none; 0 in memory).",
            log.fsyncs,
        );
        t.single(
            "snowline_log_checkpoints_total",
            "counter",
            "Durable mode: checkpoints written (0 in memory).",
            log.checkpoints,
        );
        t.single(
            "snowline_log_pending_records",
            "gauge",
            "Durable mode: records appended and not yet committed (their effects are held).",
            durable.map_or(0, |d| d.host.pending()),
        );
        t.single(
            "snowline_disk_full",
            "gauge",
            "Durable mode: 1 while the disk is full (client writes are refused), else 0.",
            u8::from(durable.is_some_and(|d| d.host.disk_full())),
        );
        t.histogram(
            "snowline_log_commit_seconds",
            "Durable mode: time of one log commit, fsync included (empty in memory).",
            &self.counters.commit,
        );
        t.finish()
    }
}
