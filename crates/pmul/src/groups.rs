//! Dynamic multicast groups: the Announce, Request, Reject and Release PDUs of ACP 142, sans-IO.
//!
//! ACP 142 lets a sender take a multicast group for a message's destinations on the fly, besides
//! the configured ones. The roles, in ACP 142's words as the NTNU implementation quotes them:
//! - "The Request_PDU is distributed by a node wishing to initiate a new multicast group within
//!   T_Nodes";
//! - "The Reject_PDU is used by a member of T_Nodes which already 'owns' the multicast group. The
//!   Reject_PDU is sent to the requesting node in unicast mode";
//! - "The Release_PDU is used ... (1) after the sender has received a Reject_PDU, (2) after a
//!   transmission has finished", to tell the nodes the sender has given the group up;
//! - the Announce_PDU tells the nodes listed in it to join the announced group.
//!
//! On STANAG 5066 a "multicast group" is a 5066 group address the node's SIS server listens on;
//! the gateway turns [`GroupEvent::Join`] and [`GroupEvent::Leave`] into that, and sends each
//! [`GroupOutput`] to everyone (`to: None`) or to one node. Two nodes that request the same group
//! at once each reject the other and both release it; they may try another group.

use std::collections::{BTreeMap, VecDeque};

use crate::pdu::{AnnouncePdu, EncodeError, GroupPdu, Map, Pdu};

/// A PDU for the bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOutput {
    /// The node to send it to; `None`: to every node.
    pub to: Option<u32>,
    /// The encoded PDU.
    pub bytes: Vec<u8>,
}

/// What the gateway should do about groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupEvent {
    /// Listen on `group`: `owner` announced it with this node as a member.
    Join {
        /// The group.
        group: u32,
        /// The node that announced it.
        owner: u32,
    },
    /// Stop listening on `group`: its owner released it.
    Leave {
        /// The group.
        group: u32,
        /// The node that released it.
        owner: u32,
    },
    /// Another node owns `group`: our request for it was refused (and released).
    Rejected {
        /// The group.
        group: u32,
        /// The node that owns it.
        by: u32,
    },
}

/// This node's view of the dynamic groups.
#[derive(Debug)]
pub struct GroupManager {
    own_id: u32,
    /// Groups this node requested or announced, with the message id used for them.
    owned: BTreeMap<u32, u32>,
    /// Groups this node joined, with their owner.
    joined: BTreeMap<u32, u32>,
    out: VecDeque<GroupOutput>,
    events: VecDeque<GroupEvent>,
}

impl GroupManager {
    /// The group state of node `own_id`.
    pub fn new(own_id: u32) -> Self {
        GroupManager {
            own_id,
            owned: BTreeMap::new(),
            joined: BTreeMap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    fn send(&mut self, to: Option<u32>, pdu: &Pdu) -> Result<(), EncodeError> {
        let bytes = pdu.encode()?;
        self.out.push_back(GroupOutput { to, bytes });
        Ok(())
    }

    fn group_pdu(&self, message_id: u32, group: u32) -> GroupPdu {
        GroupPdu {
            source: self.own_id,
            message_id,
            group,
        }
    }

    /// Asks every node for `group`, for message `message_id`.
    pub fn request(&mut self, group: u32, message_id: u32) -> Result<(), EncodeError> {
        self.owned.insert(group, message_id);
        let g = self.group_pdu(message_id, group);
        self.send(None, &Pdu::Request(g))
    }

    /// Tells `members` to join `group` for message `message_id`, which expires at `expiry`
    /// (seconds since the epoch).
    pub fn announce(
        &mut self,
        group: u32,
        message_id: u32,
        expiry: u32,
        members: Vec<u32>,
    ) -> Result<(), EncodeError> {
        self.owned.insert(group, message_id);
        let pdu = Pdu::Announce(AnnouncePdu {
            map: Map::ONLY,
            source: self.own_id,
            message_id,
            expiry,
            group,
            members,
        });
        self.send(None, &pdu)
    }

    /// Gives `group` up (the transmission has finished).
    pub fn release(&mut self, group: u32) -> Result<(), EncodeError> {
        let Some(message_id) = self.owned.remove(&group) else {
            return Ok(());
        };
        let g = self.group_pdu(message_id, group);
        self.send(None, &Pdu::Release(g))
    }

    /// Takes in a received PDU; other PDU types are ignored.
    pub fn handle(&mut self, pdu: &Pdu) -> Result<(), EncodeError> {
        match pdu {
            Pdu::Request(r) if r.source != self.own_id => {
                if let Some(&message_id) = self.owned.get(&r.group) {
                    let g = self.group_pdu(message_id, r.group);
                    self.send(Some(r.source), &Pdu::Reject(g))?;
                }
            }
            Pdu::Reject(r) if self.owned.contains_key(&r.group) => {
                self.events.push_back(GroupEvent::Rejected {
                    group: r.group,
                    by: r.source,
                });
                self.release(r.group)?;
            }
            Pdu::Release(r) if self.joined.get(&r.group) == Some(&r.source) => {
                self.joined.remove(&r.group);
                self.events.push_back(GroupEvent::Leave {
                    group: r.group,
                    owner: r.source,
                });
            }
            Pdu::Announce(a)
                if a.members.contains(&self.own_id)
                    && self.joined.get(&a.group) != Some(&a.source) =>
            {
                self.joined.insert(a.group, a.source);
                self.events.push_back(GroupEvent::Join {
                    group: a.group,
                    owner: a.source,
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The next PDU to send.
    pub fn poll_transmit(&mut self) -> Option<GroupOutput> {
        self.out.pop_front()
    }

    /// The next event for the gateway.
    pub fn poll_event(&mut self) -> Option<GroupEvent> {
        self.events.pop_front()
    }

    /// Groups this node has joined, with their owners.
    pub fn joined(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.joined.iter().map(|(&g, &o)| (g, o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(o: &GroupOutput) -> Pdu {
        Pdu::decode(&o.bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Delivers everything `from` sends to `to` (unicast ones only if addressed to it).
    fn pass(from: &mut GroupManager, to: &mut GroupManager) {
        while let Some(o) = from.poll_transmit() {
            if o.to.is_none() || o.to == Some(to.own_id) {
                to.handle(&decode(&o)).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }

    #[test]
    fn request_for_an_owned_group_is_rejected_then_released() {
        let mut a = GroupManager::new(1);
        let mut b = GroupManager::new(2);
        b.request(0x1000_0007, 9).unwrap_or_else(|e| panic!("{e}"));
        pass(&mut b, &mut a); // a owns nothing: silence
        assert!(a.poll_transmit().is_none());
        a.request(0x1000_0007, 3).unwrap_or_else(|e| panic!("{e}"));
        pass(&mut a, &mut b); // b owns it: b rejects, unicast to a
        let reject = b.poll_transmit().unwrap_or_else(|| panic!("no reject"));
        assert_eq!(reject.to, Some(1));
        assert!(
            matches!(decode(&reject), Pdu::Reject(g) if g.group == 0x1000_0007 && g.source == 2)
        );
        a.handle(&decode(&reject)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a.poll_event(),
            Some(GroupEvent::Rejected {
                group: 0x1000_0007,
                by: 2
            })
        );
        let release = a.poll_transmit().unwrap_or_else(|| panic!("no release"));
        assert!(matches!(decode(&release), Pdu::Release(g) if g.message_id == 3));
    }

    #[test]
    fn announce_joins_members_and_release_makes_them_leave() {
        let mut owner = GroupManager::new(1);
        let mut member = GroupManager::new(2);
        let mut other = GroupManager::new(3);
        owner
            .announce(0x1000_0001, 5, 100, vec![2, 4])
            .unwrap_or_else(|e| panic!("{e}"));
        let ann = owner
            .poll_transmit()
            .unwrap_or_else(|| panic!("no announce"));
        for m in [&mut member, &mut other] {
            m.handle(&decode(&ann)).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(
            member.poll_event(),
            Some(GroupEvent::Join {
                group: 0x1000_0001,
                owner: 1
            })
        );
        assert_eq!(other.poll_event(), None);
        // A repeated announce does not join twice.
        member
            .handle(&decode(&ann))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(member.poll_event(), None);
        owner.release(0x1000_0001).unwrap_or_else(|e| panic!("{e}"));
        pass(&mut owner, &mut member);
        assert_eq!(
            member.poll_event(),
            Some(GroupEvent::Leave {
                group: 0x1000_0001,
                owner: 1
            })
        );
        assert_eq!(member.joined().count(), 0);
    }
}
