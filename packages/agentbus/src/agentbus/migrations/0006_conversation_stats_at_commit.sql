-- The conversation statistics trigger runs when the sending transaction commits, not when the
-- message row is inserted.
--
-- Every message of a conversation updates the same conversations row. Fired at insert, the
-- row's lock was held from the insert until the commit, across the rest of the send's
-- statements and the gateway's round trips in between, so concurrent sends to one
-- conversation queued behind each other for as long as the slowest of them took. Deferred to
-- commit, the lock is held only for the commit itself. The function is unchanged.
DROP TRIGGER messages_conversation_stats ON messages;

CREATE CONSTRAINT TRIGGER messages_conversation_stats AFTER INSERT ON messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION messages_conversation_stats();
